"""Rows are shown under today's registry names (sveb.estimators.families.current_name): an old bundle stored SVEB's
earlier numca as `numca`, which today is the authors' estimator; every table, board and plot must call that row
`numca-sveb`, never show two rows under one name, and draw every estimator in its own colour."""

import csv
import json
from pathlib import Path

import pyarrow as pa
import pytest
from rich.console import Console

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.engines.scripted import ScriptedEngine
from sveb.estimators import BUILTIN, entry
from sveb.estimators.families import current_name, defaults, family_of
from sveb.evaluate import evaluate
from sveb.present import leaderboard, plots
from sveb.sample.pipeline import build
from sveb.score.paper_rows import is_ref_row

RESULTS = Path(__file__).resolve().parents[1] / "results"
OLD = {"numca": {}, "hista": {k: v for k, v in defaults()["hista-sveb"].items()},
       "shear": {k: defaults()["shear-sveb"][k] for k in ("d_min", "eps", "exact", "k", "layer", "s", "w")},
       "pacs": {k: defaults()["pacs-sveb"][k] for k in ("batch", "beta", "epochs", "grad_accum", "lr",
                                                         "policy_model", "seed", "train_build", "train_layers",
                                                         "value")}}


@pytest.mark.parametrize("name", sorted(OLD))
def test_a_stored_earlier_reading_is_named_as_today(name):
    """The settings the old bundles stored (results/powered's) under the then-names: today's X-sveb."""
    assert current_name(name, json.dumps(OLD[name])) == f"{name}-sveb"
    assert current_name(name, OLD[name]) == f"{name}-sveb" and family_of(name, json.dumps(OLD[name])) == "variant"
    assert current_name(name, json.dumps(defaults()[name])) == name  # the authors' reading keeps its name
    assert current_name(f"{name}-sveb", "{}") == f"{name}-sveb"  # today's names are fixed points


def test_other_rows_keep_their_names():
    assert current_name("numca", json.dumps({**defaults()["numca"], "merge": 10})) == "numca"  # an ablation
    assert current_name("ppo-1", json.dumps({**defaults()["ppo-1"], "seed": 2})) == "ppo-1"  # a training seed
    assert current_name("grpo", "{}") == "grpo" and current_name("my.plugin:Est", "{}") == "my.plugin:Est"
    assert current_name("numca") == "numca"  # no params: the row is taken at its default
    assert current_name("numca", "") == "numca"  # unknown settings (a published table's row, a CSV's empty cell)
    assert current_name("shear", json.dumps({"d_min": 0.1, "foo": 1})) == "shear"  # not the old reading's keys


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A scripted build with grpo and mcs-1 scored, and two stored rows named `numca`: the authors' estimator at
    its default, and (as an old bundle stored it) SVEB's earlier reading under its then-name."""
    src = tmp_path_factory.mktemp("src") / "dapo.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                             for a in range(1, 10) for b in range(1, 10)))
    cfg = BuildConfig(domain="number", model="scripted", source=str(src), problems=4, oversample=3, rollouts=8,
                      states_per_problem=3, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=0, dtype="float32",
                      min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200), engine="scripted")
    root = tmp_path_factory.mktemp("root")
    bdir = build(cfg, root, engine=ScriptedEngine())
    for name in ("grpo", "mcs-1"):
        evaluate(bdir, name, {}, "held-out")
    est = [r for r in store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist() if r["estimator"] == "mcs-1"]
    score = next(r for r in store.read_table(bdir / "scores", schema.SCORES).to_pylist() if r["estimator"] == "mcs-1")
    for pfp, params, shift in (("authors00000", defaults()["numca"], 0.0), ("oldsveb00000", {}, 0.1)):
        pj = json.dumps(params, sort_keys=True)
        rows = [{**r, "estimator": "numca", "params_fp": pfp, "params": pj,
                 "value": min(1.0, r["value"] + shift)} for r in est]
        store.write_shard(store.shard_path(bdir / "estimates", f"numca-{pfp}-held-out"),
                          pa.Table.from_pylist(rows, schema=schema.ESTIMATES), "test")
        store.write_shard(store.shard_path(bdir / "scores", f"numca-{pfp}-held-out"),
                          pa.Table.from_pylist([{**score, "estimator": "numca", "params_fp": pfp, "params": pj}],
                                               schema=schema.SCORES), "test")
    return root


def test_the_leaderboard_names_the_old_row_by_its_current_name(root, tmp_path):
    rows = leaderboard.rows(root)
    by_pfp = {r["params_fp"]: r["estimator"] for r in rows}
    assert by_pfp["authors00000"] == "numca" and by_pfp["oldsveb00000"] == "numca-sveb"
    assert {r["family"] for r in rows if r["estimator"] == "numca-sveb"} == {"variant"}
    path = leaderboard.write_csv(rows, tmp_path / "lb.csv")
    shown = [(r["estimator"], r["params"]) for r in csv.DictReader(open(path))]
    assert ("numca-sveb", "{}") in shown and ("numca", "{}") not in shown
    con = Console(width=80, record=True, color_system=None)
    leaderboard.print_pivot(rows, con)
    names = [line.split("│")[0].strip() for line in con.export_text().splitlines() if "│" in line]
    assert "numca-sveb" in names and "numca" in names
    assert len(names) == len(set(names))  # one table: no two rows under one name


def test_the_report_shows_every_row_once_under_its_current_name(root, tmp_path):
    from sveb.present.report import write_report
    write_report(root, tmp_path / "rep")
    md = (tmp_path / "rep" / "table.md").read_text()
    mae = md.split("## MAE: ")[1].split("\n\n")[1]  # the first MAE table
    names = [line.split("|")[1].strip() for line in mae.splitlines()[2:]]
    assert "numca-sveb" in names and "numca" in names and len(names) == len(set(names))
    paired = list(csv.DictReader(open(tmp_path / "rep" / "paired.csv")))
    assert sorted(r["estimator"] for r in paired) == ["mcs-1", "numca", "numca-sveb"]


def test_a_board_table_carries_todays_names():
    from sveb.board.pool import current_names
    rows = current_names([{"estimator": "pacs", "params": json.dumps(OLD["pacs"])},
                          {"estimator": "pacs", "params": json.dumps(defaults()["pacs"])}])
    assert [r["estimator"] for r in rows] == ["pacs-sveb", "pacs"]


def _committed(pattern: str) -> list[Path]:
    return sorted(p for p in RESULTS.glob(pattern) if p.is_file())


@pytest.mark.parametrize("path", _committed("**/leaderboard.csv") + _committed("**/scores.csv"),
                         ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_committed_table_names_each_row_once_and_by_its_estimator(path):
    """No row under a name that is not its estimator's today, and no two rows of one table (model, domain,
    protocol, pool or build, setting) under one shown label: in a CSV the label is the name and its params."""
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    known = {e.name for e in BUILTIN}
    table = [c for c in ("model", "domain", "protocol", "setting", "kind", "seeds", "build_fp", "content_hash")
             if rows and c in rows[0]]
    seen = set()
    for i, r in enumerate(rows):
        name = r["estimator"]
        assert name in known or is_ref_row(name), f"row {i + 2}: {name} is not a registered estimator"
        if "params" in r:
            assert current_name(name, r["params"]) == name, f"row {i + 2}: {name} is {current_name(name, r['params'])}"
        label = (*(r[c] for c in table), name, json.dumps(json.loads(r.get("params") or "{}"), sort_keys=True))
        assert label not in seen, f"row {i + 2}: {name} twice in one table"
        seen.add(label)


def test_every_estimator_has_its_own_colour():
    """grpo and shear once shared one: a legend could not tell them apart."""
    names = [e.name for e in BUILTIN]
    labels = names + [f"{n} (seed=1)" for n in names if entry(n).role != "scale"] + ["mcs-2-ref", "my.plugin:Est"]
    colours = plots.palette(labels)
    assert set(colours) == set(labels) and len(set(colours.values())) == len(labels)
    again = plots.palette(sorted(labels))  # the same set: the same colours whatever order the labels come in
    assert {lab: again[lab] for lab in labels if plots.is_scale(lab)} == \
        {lab: colours[lab] for lab in labels if plots.is_scale(lab)}


def test_compare_finds_an_old_row_by_its_current_name(root):
    from sveb import store as st
    from sveb.score.compare import default_key
    from sveb.score.pooling import load_view, read_scores
    bdir = st.list_builds(root)[0]
    view = load_view(bdir, read_scores(bdir))
    assert default_key(view, "numca-sveb", "held-out")[1] == "oldsveb00000"
    assert default_key(view, "numca", "held-out")[1] == "authors00000"
