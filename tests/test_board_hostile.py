"""Hostile bundles and duplicate builds on a board and a root: each refused in one line, the board's files
byte-identical afterwards, a clean add still works (fuzzing audit, defects A and B)."""

import json
import shutil

import pytest

from sveb import board
from sveb.board.bundle import estimates_key, read_bundle
from sveb.evaluate import evaluate
from tests.helpers.cli import cli, one_line_error


def files(lb):
    return {p.relative_to(lb): p.read_bytes() for p in lb.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A scripted build, three bundles of it and a board holding grpo, made once for the module."""
    from dataclasses import replace

    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    from tests.helpers.sources import write_chain_source
    tmp = tmp_path_factory.mktemp("board-hostile")
    cfg = BuildConfig(domain="number", model="scripted", source=str(write_chain_source(tmp / "dapo.jsonl")),
                      problems=4, oversample=3, rollouts=8, states_per_problem=2, mc=10, mc_extra=4, min_acc=0.1,
                      max_acc=0.9, seed=3, min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200),
                      engine="scripted")
    root = tmp / "root"
    bdir = build(replace(cfg, model="smollm2-135m"), root, engine=ScriptedEngine())
    for name in ("grpo", "mcs-2", "numca"):
        r = cli("submit", "-e", name, "--root", root, "--build", bdir.name, "--out", tmp / f"b-{name}")
        assert r.exit_code == 0, r.output
    assert board.add(tmp / "board", tmp / "b-grpo", [bdir])[1] == "added"
    return tmp, root, bdir


@pytest.fixture
def setup(pristine, tmp_path):
    """(build, {estimator: bundle}, board holding grpo): each test's own copy of them."""
    tmp, root, bdir = pristine
    w = shutil.copytree(tmp, tmp_path / "w")  # whole: the board names its build by a relative path
    return (w / bdir.relative_to(tmp), {name: w / f"b-{name}" for name in ("grpo", "mcs-2", "numca")},
            w / "board")


@pytest.fixture
def scripted_build(pristine, tmp_path):
    """A copy of the module's root and build: (root, build dir)."""
    _, root, bdir = pristine
    mine = shutil.copytree(root, tmp_path / "root")
    return mine, mine / bdir.relative_to(root)


def rekeyed(src, dst, edit):
    """A copy of bundle `src`, renamed, edited by `edit(meta)`, its key recomputed (a checksum, not a signature)."""
    shutil.copytree(src, dst)
    meta = json.loads((dst / "bundle.json").read_text())
    meta["estimator"]["name"] = "hostile"
    edit(meta)
    _, table = read_bundle(src)
    meta["key"] = estimates_key(meta, table)
    (dst / "bundle.json").write_text(json.dumps(meta))
    return dst


def _set(path, value):
    def edit(meta):
        d = meta
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return edit


HOSTILE = {
    "sveb_version": (("sveb_version",), 5),
    "estimator.provenance.version": (("estimator", "provenance", "version"), 5),
    "estimator.provenance.kind": (("estimator", "provenance", "kind"), ["builtin"]),
    "estimator.provenance.distribution": (("estimator", "provenance", "distribution"), {"a": 1}),
    "cost.held-out.train_tokens": (("cost", "held-out", "train_tokens"), 1e30),
    "cost.in-group.seconds": (("cost", "in-group", "seconds"), 1e300),
    "estimator.params.k": (("estimator", "params", "k"), "many"),
    "estimator.needs_hidden": (("estimator", "needs_hidden"), "yes"),
}


@pytest.mark.parametrize("field", sorted(HOSTILE))
def test_a_hostile_bundle_is_refused_and_the_board_is_untouched(setup, tmp_path, field):
    _, bundles, lb = setup
    path, value = HOSTILE[field]
    bad = rekeyed(bundles["mcs-2"], tmp_path / "bad", _set(path, value))
    before = files(lb)
    one_line_error(cli("leaderboard", "add", bad, "--board", lb), str(bad / "bundle.json"), field)
    assert files(lb) == before
    r = cli("leaderboard", "add", bundles["mcs-2"], "--board", lb)  # a clean add after the refused one
    assert r.exit_code == 0 and "added:" in r.output, r.output
    assert {x["estimator"] for x in board.rows(lb)} == {"grpo", "mcs-2"}


def test_a_bundle_whose_parquet_breaks_pyarrow_in_two_lines_is_refused_in_one(setup, tmp_path):
    """Flipping byte 4 (the first page header) makes pyarrow raise 'Couldn't deserialize thrift ...' over two lines
    (CI found it by fuzzing a tar): the refusal is still one line, the board untouched."""
    import io

    import pyarrow.parquet as pq
    _, bundles, lb = setup
    bad = shutil.copytree(bundles["mcs-2"], tmp_path / "bad")
    raw = bytearray((bad / "estimates.parquet").read_bytes())
    raw[4] ^= 1
    with pytest.raises(OSError) as e:
        pq.read_table(io.BytesIO(bytes(raw)))
    assert "\n" in str(e.value).strip()  # the case this test is for: pyarrow's text spans lines
    (bad / "estimates.parquet").write_bytes(bytes(raw))
    before = files(lb)
    one_line_error(cli("leaderboard", "add", bad, "--board", lb), "estimates.parquet: unreadable", "page header")
    assert files(lb) == before


def test_a_failed_table_write_takes_the_add_back(setup, monkeypatch):
    _, bundles, lb = setup
    before = files(lb)

    def boom(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(board.scores, "_write_table", boom)  # the scores table is written there
    with pytest.raises(OSError):
        board.add(lb, bundles["mcs-2"])
    assert files(lb) == before
    assert sorted(p.name for p in (lb / "bundles").iterdir()) == sorted(p.name for p in (lb / "bundles").iterdir()
                                                                        if (p / "bundle.json").exists())
    monkeypatch.undo()
    assert board.add(lb, bundles["mcs-2"])[1] == "added"


@pytest.mark.parametrize("where", ["bundle.json", "scored"])
def test_a_poisoned_board_names_the_stored_bundle(setup, where):
    """A board an older SVEB let a hostile bundle into: every later add says which stored bundle to take out."""
    _, bundles, lb = setup
    key = board.add(lb, bundles["mcs-2"])[0]
    stored = lb / "bundles" / key / "bundle.json"
    if where == "bundle.json":
        stored.write_text(json.dumps({**json.loads(stored.read_text()), "sveb_version": 5}))
    rows = json.loads((lb / "scored" / f"{key}.json").read_text())
    (lb / "scored" / f"{key}.json").write_text(json.dumps([{**r, "sveb_version": 5} for r in rows]))
    before = files(lb)
    names = (str(stored), "sveb_version") if where == "bundle.json" else ("column sveb_version", key)
    one_line_error(cli("leaderboard", "add", bundles["numca"], "--board", lb), *names)
    assert files(lb) == before


def test_the_same_seed_twice_in_a_pool_is_refused(scripted_build, tmp_path):
    root, bdir = scripted_build
    evaluate(bdir, "grpo", {}, "held-out")
    root2 = tmp_path / "root2"
    a, b = root2 / "smollm2-135m" / "number" / "a", root2 / "smollm2-135m" / "number" / "b"
    shutil.copytree(bdir, a)
    shutil.copytree(bdir, b)
    out = tmp_path / "x.csv"
    one_line_error(cli("leaderboard", "--root", root2, "--out", out), str(a), str(b), "seed 3")
    assert not out.exists()
    r = cli("leaderboard", "--root", root, "--out", out)  # the one build alone is fine
    assert r.exit_code == 0, r.output
