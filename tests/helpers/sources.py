"""A local number source the scripted engine answers (it reads 'What is a + b?' and sums)."""

import json
from pathlib import Path


def write_chain_source(path: Path) -> Path:
    """A local file in DAPO-Math's own schema with 'What is a + b?' questions the scripted engine answers."""
    rows = [{"prompt": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(1, 10) for b in range(1, 10)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path
