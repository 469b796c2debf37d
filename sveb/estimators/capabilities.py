"""The builtin estimators' capabilities, as their classes declare them (sveb.estimators.base.Estimator's class
attributes), kept in capabilities.json so that the registry, `sveb --help` and `sveb ls estimators` read them
without importing an estimator module (several import torch at the top). The classes are the one source:
`python -m sveb.estimators.capabilities` (run by `make docs`) rewrites the file, and
tests/test_registry_and_cli_on_cpu.py fails while it differs from the classes.
"""

from __future__ import annotations

import json

from sveb.estimators.base import capabilities_of
from sveb.estimators.registry import CAPABILITIES_FILE, DECLARED, Entry


def compute() -> dict[str, dict]:
    """Every builtin class's capabilities, keyed by its target `module:Class` (imports them: torch included)."""
    targets = sorted({e.target for e in DECLARED})
    return {t: {k: v for k, v in sorted(capabilities_of(Entry(t, t).load()).items())} for t in targets}


def stored() -> dict[str, dict]:
    return json.loads(CAPABILITIES_FILE.read_text()) if CAPABILITIES_FILE.exists() else {}


if __name__ == "__main__":
    from sveb.estimators.registry import CAPABILITIES_FILE
    # top level sorted, each grid in its declared order (the order `sveb ablate` runs it)
    CAPABILITIES_FILE.write_text(json.dumps(compute(), indent=1) + "\n")
    print(f"wrote {CAPABILITIES_FILE}")
