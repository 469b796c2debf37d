"""docs/cli.md is generated from the typer app; this fails when it is stale."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = "make docs  (= typer sveb.cli utils docs --name sveb --output docs/cli.md)"


def generate(out: Path) -> None:
    """What `make docs` runs, with this checkout's sveb first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "typer", "sveb.cli", "utils", "docs", "--name", "sveb", "--output", str(out)],
                   cwd=ROOT, env=env, check=True, capture_output=True, text=True)


def test_cli_reference_is_current(tmp_path):
    fresh = tmp_path / "cli.md"
    generate(fresh)
    current = ROOT / "docs" / "cli.md"
    assert current.exists(), f"docs/cli.md is missing: run `{FIX}`"
    assert current.read_text() == fresh.read_text(), \
        f"docs/cli.md is stale (the CLI changed): run `{FIX}` and commit it"
