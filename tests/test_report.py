"""The static report on real scripted builds: files, PNGs, Table-4 layout, paired CSV, self-contained HTML."""

import csv
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from sveb.core.config import BuildConfig, SamplingConfig
from sveb.engines.scripted import ScriptedEngine
from sveb.evaluate import evaluate
from sveb.evaluate.protocols import PROTOCOL_LABELS
from sveb.present import report
from sveb.sample.pipeline import build

ESTIMATORS = ["grpo", "mcs-1", "mcs-2", "mcs-3", "mcs-4"]
PROTOCOLS = ["in-group", "held-out"]


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> BuildConfig:
    src = tmp_path_factory.mktemp("src") / "dapo.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                             for a in range(1, 10) for b in range(1, 10)))
    return BuildConfig(domain="number", model="scripted-a", source=str(src), problems=6, oversample=3, rollouts=8,
                       states_per_problem=3, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=3,
                       min_novel_numbers=0,  # "a + b" answers carry no milestone numbers
                       sampling=SamplingConfig(max_tokens=200), engine="scripted")


def _evaluate(bdir, names, protocols):
    for proto in protocols:
        for name in names:
            evaluate(bdir, name, {}, proto)


@pytest.fixture(scope="module")
def root(tmp_path_factory, cfg) -> Path:
    """Two scored builds (models a, b), numca only in-group on a, and a third build with no scores."""
    root = tmp_path_factory.mktemp("root")
    a = build(cfg, root, engine=ScriptedEngine())
    b = build(replace(cfg, model="scripted-b", seed=5), root, engine=ScriptedEngine())
    build(replace(cfg, model="scripted-c"), root, engine=ScriptedEngine())
    for bdir in (a, b):
        _evaluate(bdir, ESTIMATORS, PROTOCOLS)
    _evaluate(a, ["numca"], ["in-group"])
    return root


@pytest.fixture(scope="module")
def out(root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    assert report.write_report(root, out) == out / "index.html"
    return out


def _md_tables(text: str) -> dict[str, list[list[str]]]:
    """'## MAE: <title>' -> rows of cells (header first, separator dropped)."""
    tables = {}
    for m in re.finditer(r"## MAE: (.+)\n\n((?:\|.*\|\n)+)", text):
        lines = [ln for ln in m.group(2).strip().splitlines() if not re.fullmatch(r"\|[:\-|]+\|", ln)]
        tables[m.group(1)] = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return tables


def test_every_expected_file_exists(out):
    for name in ("leaderboard.csv", "table.md", "paired.csv", "index.html"):
        assert (out / name).stat().st_size > 0, name
    pngs = {p.name for p in out.glob("*.png")}
    for model in ("scripted-a", "scripted-b"):
        for proto in PROTOCOLS:
            assert f"mae_{model}_{proto}.png" in pngs
            for kind in ("hist", "calib", "position"):
                assert any(p.startswith(f"{kind}_{model}_number_") and p.endswith(f"_{proto}.png") for p in pngs)
    assert not any("scripted-c" in p for p in pngs)  # unscored build is skipped


def test_pngs_are_valid_images(out):
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 4 + 2 * 2 * 3
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p.name
        img = imread(p)
        assert img.shape[0] > 100 and img.shape[1] > 100, p.name


def test_table_md_has_paper_layout(out):
    text = (out / "table.md").read_text(encoding="utf-8")
    tables = _md_tables(text)
    assert set(tables) == {f"scripted-{m} — {PROTOCOL_LABELS[p]}" for m in "ab" for p in PROTOCOLS}
    # held-out is the headline: its table comes first
    held_out, in_group = PROTOCOL_LABELS["held-out"], PROTOCOL_LABELS["in-group"]
    assert text.index(f"scripted-a — {held_out}") < text.index(f"scripted-a — {in_group}")
    for title, rows in tables.items():
        header, body = rows[0], rows[1:]
        assert header[0] == "estimator" and header[1].startswith("number")
        names = [r[0] for r in body]
        assert names[0] == "grpo"
        assert names[-1] == "states / problems"
        i = names.index("oracle floor (knows V)")
        assert names[i + 1] == "ref noise (not a bound)"
        assert names[i + 2:i + 6] == ["mcs-1", "mcs-2", "mcs-3", "mcs-4"]
        assert all(not n.startswith("mcs-") for n in names[:i])
        for col in range(1, len(header)):
            bold = [r[0] for r in body if r[col].startswith("**")]
            assert len(bold) == 1 and not bold[0].startswith("mcs-") and "floor" not in bold[0], (title, col)
        assert re.fullmatch(r"\*{0,2}\d\.\d{3} ± \d\.\d{3}\*{0,2}", body[0][1])
    # numca was scored in-group only on model a: a row there, none held-out
    assert "numca" in [r[0] for r in tables[f"scripted-a — {PROTOCOL_LABELS['in-group']}"]]
    assert "numca" not in [r[0] for r in tables["scripted-a — held-out"]]
    assert "Own-outcome share (in-group)" in text
    assert "scripted-c" in text and "no scores" in text


def test_paired_csv(out):
    rows = list(csv.DictReader(open(out / "paired.csv")))
    assert {r["estimator"] for r in rows} == {"mcs-1", "mcs-2", "mcs-3", "mcs-4", "numca"}
    assert len(rows) == 4 * 2 * 2 + 1
    for r in rows:
        assert 0.0 <= float(r["p_delta"]) <= float(r["p_holm"]) <= 1.0
        assert float(r["delta_sq_ci_low"]) <= float(r["delta_sq"]) <= float(r["delta_sq_ci_high"])
        assert r["verdict"] in ("better", "worse", "no difference") and r["kind"] == "build"
        assert int(r["n_states"]) == 18
    assert "Paired comparison against grpo" in (out / "table.md").read_text(encoding="utf-8")


def test_index_html_is_self_contained(out):
    page = (out / "index.html").read_text(encoding="utf-8")
    for p in out.glob("*.png"):
        assert f"src='{p.name}'" in page, p.name
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page
    for word in ("scripted-a", "scripted-b", "number", "Paired comparison", "oracle floor", "<b>"):
        assert word in page
    for model in ("scripted-a", "scripted-b"):
        assert re.search(rf"<td>{model}</td><td>number</td><td>[0-9a-f]{{12}}</td><td>complete</td><td>18</td>", page)


def test_root_without_scores_is_a_clear_error(tmp_path, cfg):
    with pytest.raises(report.ReportError, match="no builds"):
        report.write_report(tmp_path / "empty", tmp_path / "out")
    build(cfg, tmp_path / "root", engine=ScriptedEngine())
    with pytest.raises(report.ReportError, match="has scores.*sveb eval"):
        report.write_report(tmp_path / "root", tmp_path / "out")


def test_single_estimator_says_there_is_no_histogram(tmp_path, cfg):
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine())
    evaluate(bdir, "grpo", {}, "in-group")
    page = report.write_report(tmp_path / "root", tmp_path / "out").read_text(encoding="utf-8")
    assert "only estimator" in page and "no difference histogram" in page
    assert not list((tmp_path / "out").glob("hist_*.png"))
    assert len(list((tmp_path / "out").glob("calib_*.png"))) == 1
    assert list(csv.DictReader(open(tmp_path / "out" / "paired.csv"))) == []


def _view(scores, params=None):
    return report.View(Path("/x/m/number/abc"), "m", "number", "complete", scores, np.array([]), np.array([]),
                       np.array([]), params=params or {}, col="number")


def _score(name, mae, pfp="p0", lo=0.1, hi=0.3):
    return {"estimator": name, "params_fp": pfp, "params": "{}", "protocol": "in-group", "mae": mae,
            "mae_ci_low": lo, "mae_ci_high": hi, "oracle_floor": float("nan"), "ref_noise": float("nan"),
            "n_states": 3, "n_problems": 1}


def test_nan_scores_are_shown_and_never_best():
    v = _view([_score("grpo", float("nan")), _score("numca", 0.2, lo=float("nan")), _score("mcs-1", 0.05)])
    t = report._table([v], "in-group", {})
    rows = {r[0]: r for r in t["rows"]}
    assert rows["grpo"][1] == ["–"] and rows["grpo"][2] == [False]
    assert rows["numca"][1] == ["0.200"] and rows["numca"][2] == [True]
    assert rows["oracle floor (knows V)"][1] == ["–"] and rows["mcs-1"][2] == [False]


def test_labels_show_only_non_default_params():
    v = _view([], params={("numca-sveb", "a"): "{}", ("numca-sveb", "b"): '{"foo": 2}',
                          ("no-such-est", "c"): '{"k": 1, "j": 0}', ("no-such-est", "d"): '{"k": 2, "j": 0}'})
    labels = report._labels([v])
    assert labels[("numca-sveb", "a")] == "numca-sveb" and labels[("numca-sveb", "b")] == "numca-sveb (foo=2)"
    # default unknown: only the parameter that differs between settings is shown
    assert labels[("no-such-est", "c")] == "no-such-est (k=1)" and labels[("no-such-est", "d")] == "no-such-est (k=2)"


def test_a_rewrite_removes_its_own_stale_figures_only(out, root):
    stale, mine = out / "hist_scripted-a_number_000000000000_held-out.png", out / "my_notes.png"
    stale.write_bytes(b"old"), mine.write_bytes(b"a user's file")
    report.write_report(root, out)
    assert not stale.exists() and mine.exists()
    assert len(list(out.glob("*.png"))) == 4 + 2 * 2 * 3 + 1
    mine.unlink()
