"""tools/verdict_changes.py lists exactly the rows whose verdict moved between two score files."""

from __future__ import annotations

import csv
from pathlib import Path

from tools.verdict_changes import changes, load, render

COLS = ["domain", "estimator", "protocol", "mae", "p_holm", "verdict"]


def write(path: Path, rows: list[tuple]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        w.writerows(rows)
    return path


def test_only_moved_verdicts_are_listed_and_missing_rows_apart(tmp_path):
    old = write(tmp_path / "old.csv", [
        ("number", "grpo", "held-out", 0.16, "", ""),
        ("number", "probe", "held-out", 0.15, 0.07, "no difference"),
        ("number", "hista", "held-out", 0.16, 0.8, "no difference"),
        ("number", "pacs-sveb", "held-out", 0.19, "", ""),
        ("math", "probe", "held-out", 0.2, 0.01, "better")])
    new = write(tmp_path / "new.csv", [
        ("number", "grpo", "held-out", 0.14, "", ""),
        ("number", "probe", "held-out", 0.13, 0.001, "better"),
        ("number", "hista", "held-out", 0.13, 0.3, "no difference"),
        ("number", "judge", "held-out", 0.33, 0.0, "worse"),
        ("math", "probe", "held-out", 0.2, 0.5, "no difference")])
    moved, only_old, only_new = changes(load(old), load(new), {"number"})
    assert [(k, verdict_pair(a, b)) for k, a, b in moved] == [
        (("number", "probe", "held-out"), ("no difference", "better"))]
    assert only_old == [("number", "pacs-sveb", "held-out")]
    assert only_new == [("number", "judge", "held-out")]
    text = "\n".join(render(moved, only_old, only_new))
    assert "| number | probe | held-out | no difference → better | 0.150 → 0.130 | 0.07 → 0.001 |" in text
    assert "math" not in text
    moved_all, _, _ = changes(load(old), load(new))  # no domain filter: math's probe moved too
    assert {k[0] for k, _, _ in moved_all} == {"number", "math"}


def test_a_missing_file_or_a_foreign_csv_is_one_line(tmp_path):
    import pytest
    with pytest.raises(SystemExit, match="nope.csv: cannot read"):
        load(tmp_path / "nope.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit, match="other.csv: not a Table 4 scores.csv .no column domain"):
        load(tmp_path / "other.csv")


def verdict_pair(a: dict, b: dict) -> tuple[str, str]:
    return a["verdict"], b["verdict"]
