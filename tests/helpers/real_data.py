"""Where the tests find the real datasets: small excerpts shipped in tests/fixtures/datasets (used by default, so a
bare clone passes), and the full public files in ../shared/datasets (or $SVEB_SHARED_DATASETS) for the full-file
checks, which skip with one line when those files are absent. Both folders have the same layout."""

import json
import os
from pathlib import Path

import pytest

EXCERPTS = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
FULL = Path(os.environ.get("SVEB_SHARED_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets"))

FILES = {"gsm8k": "gsm8k/test.jsonl", "math500": "math500/test.jsonl", "humaneval": "humaneval/HumanEval.jsonl.gz",
         "mbpp": "mbpp/mbpp.jsonl", "arc-challenge": "arc_challenge/test.jsonl", "mmlu-stem": "mmlu_stem/test.jsonl"}

# name -> the full file's 1-based row of each excerpt line (written by fixtures/datasets/make_excerpts.py)
ROWS: dict[str, list[int]] = json.loads((EXCERPTS / "rows.json").read_text(encoding="utf-8"))


def full_data() -> Path:
    """The full files' folder, or a skip saying why (one reason for every full-file check, so -ra folds them)."""
    if not (FULL / "SOURCES.md").exists():
        pytest.skip(f"full datasets not found in {FULL} (set SVEB_SHARED_DATASETS): full-file checks skipped")
    return FULL


# The checks that hold on any rows of a file run on the excerpt and, where present, on the full file. (Tests look the
# folder up in their body, not in a fixture, so that every full-file skip is reported on the one line -ra folds.)
BOTH = pytest.mark.parametrize("kind", ["excerpt", "full"])


def folder(kind: str) -> Path:
    return EXCERPTS if kind == "excerpt" else full_data()
