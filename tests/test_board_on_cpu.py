"""Result bundles and boards on a scripted build: submit -> add round-trips to `sveb eval`'s scores; bad bundles
are refused in one line; adding twice changes nothing; cost figures match a case counted by hand."""

import json
import math
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sveb import board, store
from sveb.board.bundle import read_bundle
from sveb.cli import app
from sveb.core import schema
from sveb.core.cost import continuation_tokens, cost_figures, rollout_tokens

SCORE_COLS = [c for c in schema.SCORES.names if c not in ("seconds", "params")]


def cli(*args):
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r


@pytest.fixture
def bundled(scripted_build, tmp_path):
    """(root, bdir, {estimator: bundle folder}) for grpo, mcs-2 and numca under both protocols."""
    root, bdir = scripted_build
    out = {}
    for name in ("grpo", "mcs-2", "numca"):
        r = cli("submit", "-e", name, "--root", root, "--build", bdir.name, "--out", tmp_path / f"b-{name}")
        assert r.exit_code == 0, r.output
        out[name] = tmp_path / f"b-{name}"
    return root, bdir, out


def _same(a, b):
    return (a is None and (b is None or (isinstance(b, float) and math.isnan(b)))) or a == pytest.approx(b, nan_ok=True)


def test_submit_add_round_trips_to_eval_scores(bundled, tmp_path):
    root, bdir, bundles = bundled
    lb = tmp_path / "board"
    r = cli("leaderboard", "add", *bundles.values(), "--board", lb, "--build", bdir)
    assert r.exit_code == 0, r.output
    assert r.output.count("added:") == 3
    got = {(x["estimator"], x["protocol"]): x for x in board.rows(lb)}
    assert len(got) == 6
    stored = {(x["estimator"], x["protocol"]): x for x in store.read_table(bdir / "scores", schema.SCORES).to_pylist()}
    for key, row in got.items():  # every score the board recomputed equals the one `sveb eval` stored
        for c in SCORE_COLS:
            assert _same(row[c], stored[key][c]), (key, c, row[c], stored[key][c])
    assert got[("grpo", "held-out")]["verdict"] == "baseline"
    assert got[("numca", "held-out")]["verdict"] in ("better", "worse", "no difference")
    # paired Δ recomputed by hand: mean of (numca - ref)^2 - (grpo - ref)^2 over the build's states
    est = {(e["estimator"], e["protocol"], e["state_id"]): e["value"]
           for e in store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()}
    refs = {x["state_id"]: x["value"] for x in store.read_table(bdir / "references", schema.REFERENCES).to_pylist()}
    d = [(est[("numca", "held-out", s)] - v) ** 2 - (est[("grpo", "held-out", s)] - v) ** 2 for s, v in refs.items()]
    assert got[("numca", "held-out")]["delta_sq"] == pytest.approx(np.mean(d))
    meta, _ = read_bundle(bundles["numca"])
    assert meta["estimator"]["provenance"]["kind"] == "builtin"
    assert meta["build"]["content_hash"] == store.content_hash(bdir)
    assert "cpu_flags" in meta["machine"] and meta["sveb_version"]
    assert "mae" not in json.dumps(meta)  # a bundle carries no scores


def test_adding_twice_changes_nothing(bundled, tmp_path):
    root, bdir, bundles = bundled
    lb = tmp_path / "board"
    assert board.add(lb, bundles["grpo"], [bdir])[1] == "added"
    before = {p.relative_to(lb): p.read_bytes() for p in lb.rglob("*") if p.is_file()}
    shutil.make_archive(str(tmp_path / "again"), "gztar", root_dir=bundles["grpo"].parent,
                        base_dir=bundles["grpo"].name)
    for again in (bundles["grpo"], tmp_path / "again.tar.gz"):  # the folder, and the same bundle archived
        assert board.add(lb, again)[1] == "unchanged"
    after = {p.relative_to(lb): p.read_bytes() for p in lb.rglob("*") if p.is_file()}
    assert after == before


def _edit(src, dst, fn=None, meta_fn=None):
    shutil.copytree(src, dst)
    if fn:
        t = pq.read_table(dst / "estimates.parquet").to_pylist()
        pq.write_table(pa.Table.from_pylist(fn(t)), dst / "estimates.parquet")
    if meta_fn:
        m = json.loads((dst / "bundle.json").read_text())
        meta_fn(m)
        (dst / "bundle.json").write_text(json.dumps(m))
    return dst


def test_bad_bundles_are_refused_in_one_line(bundled, tmp_path):
    root, bdir, bundles = bundled
    lb = tmp_path / "board"
    assert board.add(lb, bundles["grpo"], [bdir])[1] == "added"
    src = bundles["numca"]
    first = pq.read_table(src / "estimates.parquet").to_pylist()[0]["state_id"]

    def high(rows):
        rows[3]["value"] = 1.5
        return rows
    bad_state = pq.read_table(src / "estimates.parquet").to_pylist()[3]["state_id"]

    def foreign(m):
        m["build"]["content_hash"] = "0123456789abcdef"
    cases = {
        "missing": (_edit(src, tmp_path / "m", fn=lambda rows: rows[1:]), f"missing state {first}"),
        "foreign": (_edit(src, tmp_path / "f", meta_fn=foreign), "foreign build hash 0123456789abcdef"),
        "range": (_edit(src, tmp_path / "r", fn=high), f"value 1.5 at state {bad_state}"),
        "nan": (_edit(src, tmp_path / "n", fn=lambda rows: [{**rows[0], "value": float("nan")}, *rows[1:]]),
                f"value nan at state {first}"),
        "twice": (_edit(src, tmp_path / "t", fn=lambda rows: rows + rows[:1]), f"state {first} appears twice"),
        "not a bundle": (tmp_path / "nothing", "no such bundle"),
    }
    before = {p.relative_to(lb): p.read_bytes() for p in lb.rglob("*") if p.is_file()}
    for what, (path, msg) in cases.items():
        r = cli("leaderboard", "add", path, "--board", lb)
        assert r.exit_code == 1, what
        lines = [x for x in r.output.strip().splitlines() if x]
        assert len(lines) == 1 and msg in lines[0] and lines[0].startswith("error:"), (what, r.output)
    after = {p.relative_to(lb): p.read_bytes() for p in lb.rglob("*") if p.is_file()}
    assert after == before  # nothing written on refusal


def test_cost_figures_counted_by_hand():
    states = [{"t": 2, "T": 10}, {"t": 5, "T": 7}, {"t": 1, "T": 3}]  # rests 8, 2, 2: mean 4
    rollouts = {"p": [{"prompt_token_ids": [1, 2, 3], "response_token_ids": [4] * 10}],
                "q": [{"prompt_token_ids": [1], "response_token_ids": [4] * 6}]}  # 13 + 7 = 20 tokens
    assert continuation_tokens(states) == 4.0 and rollout_tokens(rollouts) == 20
    mcs = cost_figures(target="sveb.estimators.mcs:MonteCarlo", params={"k": 3}, needs_hidden=False,
                       states=states, rollouts=rollouts, seconds=0.3)
    assert mcs["extra_tokens_per_state"] == 12.0 and mcs["forward_tokens_per_state"] == 0
    assert mcs["seconds_per_state"] == pytest.approx(0.1)
    hid = cost_figures(target="x:Y", params={}, needs_hidden=True, states=states, rollouts=rollouts, seconds=0.0,
                       train_tokens=100)
    assert hid["extra_tokens_per_state"] == 0 and hid["forward_tokens_per_state"] == pytest.approx(120 / 3)
    # a reference-scale estimator reading k of the extra draws (mcs-eb-k, mcs-cv-k) costs what MCS@k costs; a
    # k parameter of an estimator that reads no references is not a draw count
    from sveb.estimators import entry, make
    for name in ("mcs-eb-2", "mcs-cv-2"):
        e = entry(name)
        got = cost_figures(target=e.target, params={"k": make(name).k}, needs_hidden=False, states=states,
                           rollouts=rollouts, seconds=0.0, reads_references=e.reads_references)
        assert got["extra_tokens_per_state"] == 8.0, name
    other = cost_figures(target="x:Y", params={"k": 5}, needs_hidden=False, states=states, rollouts=rollouts,
                         seconds=0.0)
    assert other["extra_tokens_per_state"] == 0


def test_mcs_token_estimate_is_unbiased_where_lengths_are_known():
    """The rest of a state's own rollout is one draw of a continuation's length: averaged over many states it
    matches the continuations' true mean length (here: lengths drawn from a known geometric law)."""
    rng = np.random.default_rng(0)
    states = []
    for _ in range(20000):
        t = int(rng.integers(1, 50))
        states.append({"t": t, "T": t + int(rng.geometric(1 / 30))})  # continuation length: mean 30
    assert continuation_tokens(states) == pytest.approx(30, rel=0.02)


def test_board_cost_columns_come_from_the_build(bundled, tmp_path):
    root, bdir, bundles = bundled
    lb = tmp_path / "board"
    board.add(lb, bundles["mcs-2"], [bdir])
    board.add(lb, bundles["grpo"])
    got = {(x["estimator"], x["protocol"]): x for x in board.rows(lb)}
    st = store.read_table(bdir / "states", schema.STATES).to_pylist()
    assert got[("mcs-2", "held-out")]["extra_tokens_per_state"] == pytest.approx(
        2 * np.mean([s["T"] - s["t"] for s in st]))
    assert got[("grpo", "held-out")]["extra_tokens_per_state"] == 0
    assert got[("grpo", "held-out")]["seconds_per_state"] >= 0


def test_from_root_bundles_every_evaluated_estimator(scripted_build, tmp_path):
    root, bdir = scripted_build
    r = cli("eval", "--root", root, "-e", "grpo", "-e", "mcs-2", "-e", "numca", "--protocol", "held-out",
            "--protocol", "in-group")
    assert r.exit_code == 0, r.output
    lb = tmp_path / "board"
    r = cli("leaderboard", "add", "--from-root", root, "--board", lb)
    assert r.exit_code == 0, r.output
    assert r.output.count("added:") == 3
    got = {(x["estimator"], x["protocol"]): x for x in board.rows(lb)}
    stored = {(x["estimator"], x["protocol"]): x for x in store.read_table(bdir / "scores", schema.SCORES).to_pylist()}
    assert set(got) == set(stored)
    for key in got:
        assert got[key]["mae"] == pytest.approx(stored[key]["mae"])
    r = cli("leaderboard", "add", "--from-root", root, "--board", lb)  # again: nothing new
    assert r.exit_code == 0 and r.output.count("unchanged:") == 3


def test_submit_refuses_a_used_out_folder_before_any_work(scripted_build, tmp_path):
    root, bdir = scripted_build
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("keep me")
    r = cli("submit", "-e", "numca", "--root", root, "--build", bdir.name, "--out", tmp_path / "used")
    assert r.exit_code == 1 and "exists and is not an empty folder" in r.output
    assert not (bdir / "estimates").exists() or not list((bdir / "estimates").glob("part-numca-*"))
    assert (tmp_path / "used" / "x").read_text() == "keep me"
    r = cli("leaderboard", "add", "--board", tmp_path / "b")
    assert r.exit_code == 1 and "--from-root" in r.output


def test_a_board_and_its_builds_moved_together_still_find_each_other(bundled, tmp_path):
    """board.json keeps a build beside the board relative to it (a committed board and its exports work in any
    clone), one elsewhere absolute."""
    root, bdir, bundles = bundled
    home = tmp_path / "results"
    shutil.copytree(bdir, home / "exports" / "b")
    lb = home / "board"
    assert cli("leaderboard", "add", bundles["grpo"], "--board", lb, "--build", home / "exports" / "b").exit_code == 0
    assert json.loads((lb / "board.json").read_text())["builds"] == {store.content_hash(bdir): "../exports/b"}
    board.register(tmp_path / "elsewhere" / "board", [bdir])  # not beside the board: absolute
    assert json.loads((tmp_path / "elsewhere" / "board" / "board.json").read_text())["builds"] == {
        store.content_hash(bdir): str(bdir.resolve())}
    moved = tmp_path / "clone" / "results"
    shutil.copytree(home, moved)
    shutil.rmtree(home)
    found = board.known_builds(moved / "board")[store.content_hash(bdir)]
    assert found.resolve() == (moved / "exports" / "b").resolve()
    assert [r["mae"] for r in board.rebuild(moved / "board")] == [r["mae"] for r in board.rows(moved / "board")]
