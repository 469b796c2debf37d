"""A table pools only seeds that are replicates and parts of one compute dtype (sveb.score.composition,
sveb.score.pool_checks): the composition test on hand-made mixes, and the refusals on builds of the scripted
engine, with the flags that let them through and the note the table then carries."""

import json
from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest

from sveb import store
from sveb.core.errors import EvalError
from sveb.score import composition
from sveb.score.composition import independence
from sveb.score.pool_checks import Allow


def test_equal_mixes_pass_and_a_drift_is_found_by_chi_square():
    mix = [1, 2, 2, 3, 3, 4, 5, 5] * 20  # 160 problems per seed, every level
    same = independence([mix, list(reversed(mix)), mix[::2] + mix[1::2]])  # one mix, other orders
    assert same["method"] == "chi-square" and same["p"] == pytest.approx(1.0)
    rng = np.random.default_rng(0)  # three seeds drawn from one population: within sampling error
    assert independence([list(rng.choice(mix, 150)) for _ in range(3)])["p"] > 0.01
    drift = independence([mix, [2] * 160, mix])  # general's seeds 1-2: all level 2
    assert drift["method"] == "chi-square" and drift["p"] < 1e-10 and drift["df"] == 8


def test_small_counts_use_a_seeded_permutation_test():
    a, b = [1, 2, 3, 4, 5, 1, 3, 4, 5, 2], [2] * 10
    res = independence([a, b])
    assert res["method"] == "permutation" and res["p"] < 0.01
    assert independence([a, b]) == res  # seeded: the same p every time
    assert independence([a, list(reversed(a))])["p"] > 0.5
    # exact where it can be counted: 4 vs 4 with every 2 in one seed is 2 of the C(8, 4) = 70 splits
    p = independence([[1, 3, 4, 5], [2, 2, 2, 2]], n_perm=20000)["p"]
    assert p == pytest.approx(2 / 70, abs=0.006)
    assert independence([[2, 2], [2, 2, 2]]) == {"stat": 0.0, "df": 0, "p": 1.0, "method": "one category"}


def test_the_permutation_test_holds_its_level_on_nulls():
    rng = np.random.default_rng(56)
    ps = [independence([list(rng.integers(1, 6, 12)) for _ in range(3)], n_perm=300, seed=i)["p"] for i in range(200)]
    assert np.mean(np.array(ps) < 0.05) <= 0.08


def test_the_refusal_lines_name_the_seeds_and_dtypes():
    rows = composition.composition([0, 1], [[{"level": 1, "answer_type": "math"}] * 30 + [{"level": 3}] * 30,
                                            [{"level": 2, "answer_type": "math"}] * 60])
    line = composition.seed_refusal("m/general (a, b)", rows)
    assert line.startswith("m/general (a, b): the seeds are not replicates: level x seed p")
    assert "seed 1: 2×60" in line and "answer_type" in line  # a missing answer type counts as "?"
    assert composition.seed_refusal("x", composition.composition([0, 1], [[{"level": 1}] * 9, [{"level": 1}] * 9])) \
        is None
    assert composition.dtype_refusal("t", {"seed 0": "bfloat16", "seed 1": "float32", "seed 2": None}) == \
        "t: mixed dtypes: bfloat16: seed 0; float32: seed 1"
    assert composition.dtype_refusal("t", {"a": "float32", "b": None}) is None


def _relabel(bdir, levels):
    """Set the build's problems' meta level in table order (a hand-made mix on a real build)."""
    for path in sorted((bdir / "problems").glob("part-*.parquet")):
        t = pq.read_table(path)
        metas = [json.dumps({**json.loads(m or "{}"), "level": lv})
                 for m, lv in zip(t.column("meta").to_pylist(), levels)]
        t = t.set_column(t.schema.get_field_index("meta"), "meta", [metas])
        pq.write_table(t, path)


@pytest.fixture
def two_seeds(tmp_path, small_cfg):
    from sveb.engines.scripted import ScriptedEngine
    from sveb.evaluate import evaluate
    from sveb.sample.pipeline import build
    cfg = replace(small_cfg, model="smollm2-135m", problems=10, dtype="float32")
    root = tmp_path / "root"
    bdirs = [build(replace(cfg, seed=s), root, engine=ScriptedEngine()) for s in (3, 4)]
    for b in bdirs:
        for name in ("grpo", "mcs-2"):
            evaluate(b, name, {}, "held-out")
    return root, bdirs


def _pooled(root, allow=Allow()):
    from sveb.present.leaderboard import rows
    return [r for r in rows(root, allow=allow) if r["kind"] == "pooled"]


def test_pooling_refuses_seeds_of_different_level_mixes_unless_told(two_seeds, capsys):
    root, (a, b) = two_seeds
    _relabel(a, [1, 2, 3, 4, 5] * 40)
    _relabel(b, [5, 4, 3, 2, 1] * 40)
    assert _pooled(root) and not any(r["caveats"] for r in _pooled(root))  # equal mixes pool, nothing to say
    _relabel(b, [2] * 200)  # general-like drift: one seed all level 2
    with pytest.raises(EvalError, match=r"the seeds are not replicates: level x seed p .*--allow-unequal-seeds"):
        _pooled(root)
    rows = _pooled(root, Allow(unequal_seeds=True))
    assert rows and all("not replicates" in r["caveats"] and "--allow-unequal-seeds" in r["caveats"] for r in rows)
    from rich.console import Console

    from sveb.present.leaderboard import print_pivot
    console = Console(width=100, record=True)
    print_pivot(rows, console)
    shown = " ".join(console.export_text().split())  # the caption under the table, wrapped to the terminal
    assert "the seeds are not replicates: level x seed p" in shown and "seed 4: 2×10" in shown


def test_pooling_refuses_mixed_sampling_dtypes_unless_told(two_seeds):
    root, (a, b) = two_seeds
    m = store.read_manifest(b)
    (b / "manifest.json").write_text(json.dumps({**m, "dtype": "bfloat16"}))
    with pytest.raises(EvalError, match=r"sampling: mixed dtypes: bfloat16: seed 4 .*float32: seed 3"):
        _pooled(root)
    assert all("mixed dtypes" in r["caveats"] for r in _pooled(root, Allow(mixed_dtype=True)))


def test_a_table_refuses_estimates_computed_in_two_dtypes(scripted_build):
    from sveb.evaluate import evaluate
    from sveb.present.leaderboard import rows
    root, bdir = scripted_build
    for name in ("grpo", "mcs-1", "mcs-2"):
        evaluate(bdir, name, {}, "held-out")
    rows(root)  # nothing recorded: nothing to refuse
    for name, kind in (("mcs-1", "cpu-float32"), ("mcs-2", "cpu-bfloat16")):  # as `sveb eval` records it
        (path,) = (bdir / "timings").glob(f"{name}-*-held-out.json")
        path.write_text(json.dumps({**json.loads(path.read_text()), "compute": kind}))
    with pytest.raises(EvalError, match=r"estimates: mixed dtypes: cpu-bfloat16: mcs-2 held-out; cpu-float32: mcs-1"):
        rows(root)
    assert all("mixed dtypes" in r["caveats"] for r in rows(root, allow=Allow(mixed_dtype=True)))


def test_table4_refuses_to_pool_unequal_seeds_of_its_exports_unless_told(two_seeds, tmp_path):
    import shutil
    from types import SimpleNamespace

    from sveb.experiment.table4_files import seed_checks
    _, (a, b) = two_seeds
    exports = tmp_path / "exports"
    for src, name in ((a, "number"), (b, "number-seed1")):  # Table 4's export names: seed 0, seed 1
        shutil.copytree(src, exports / name)
    _relabel(exports / "number", [1, 2, 3, 4, 5] * 40)
    _relabel(exports / "number-seed1", [2] * 200)
    args = SimpleNamespace(exports=str(exports), model="smollm2-135m")
    with pytest.raises(SystemExit, match=r"smollm2-135m/number: the seeds are not replicates: level x seed p"):
        seed_checks(args, ["number"])
    notes = seed_checks(SimpleNamespace(**vars(args), allow_unequal_seeds=True), ["number"])
    assert len(notes) == 1 and "seed 1: 2×10" in notes[0] and "--allow-unequal-seeds" in notes[0]
    _relabel(exports / "number-seed1", [5, 4, 3, 2, 1] * 40)
    assert seed_checks(args, ["number"]) == []


def test_sveb_eval_records_the_compute_dtype_where_the_check_reads_it(tmp_path):
    from sveb.evaluate import record_prepare
    from sveb.score.pool_checks import computed_in
    record_prepare(tmp_path / "timings" / "probe-abc-held-out.json", 1.5, "cpu-float32")
    record_prepare(tmp_path / "timings" / "grpo-abc-held-out.json", 0.1)  # reads no model: nothing recorded
    assert computed_in(tmp_path, ("probe", "abc", "held-out")) == "cpu-float32"
    assert computed_in(tmp_path, ("grpo", "abc", "held-out")) is None
    assert computed_in(tmp_path, ("hista", "abc", "held-out")) is None  # no file: not recorded


def test_the_commands_that_pool_refuse_and_take_the_flag(two_seeds):
    from typer.testing import CliRunner

    from sveb.cli import app
    root, (a, b) = two_seeds
    _relabel(a, [1, 2, 3, 4, 5] * 40)
    _relabel(b, [2] * 200)
    common = ["--root", str(root), "--model", "smollm2-135m"]
    runner = CliRunner()
    for cmd in (["compare", "-a", "mcs-2", "-b", "grpo", "--seeds", "3,4", "--no-published", *common],
                ["leaderboard", "--root", str(root), "--out", str(root.parent / "lb.csv")]):
        r = runner.invoke(app, cmd)
        assert r.exit_code != 0 and "the seeds are not replicates" in r.output and "--allow-unequal-seeds" in r.output
        r = runner.invoke(app, [*cmd, "--allow-unequal-seeds"])
        assert r.exit_code == 0, r.output
        assert "not replicates" in " ".join(r.output.split())
