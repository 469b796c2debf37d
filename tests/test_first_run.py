"""Issue 61.7, the first run: the version, the frozen builds named where none is found, builds found alike by
`ls builds`, `eval` and `compare` (exports anywhere under a root), the committed Table 4 estimates beside one's
own, `sveb plan`'s build command with `sveb build`'s defaults, model loads said, the demo's output untracked."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from sveb.cli import app
from sveb.core.config import BuildConfig


def cli(*args, **kw):
    return CliRunner().invoke(app, [str(a) for a in args], **kw)


def test_version():
    from sveb import __version__
    r = cli("--version")
    assert r.exit_code == 0 and r.output.strip() == f"sveb {__version__}"


class Captured(Exception):
    pass


def _captured_build(monkeypatch):
    """`sveb build` runs its flags into a BuildConfig and stops before sampling: the config it would build."""
    import sveb.sample.pipeline as pipeline
    seen = []

    def stop(cfg, root, **kw):
        seen.append(cfg)
        raise Captured
    monkeypatch.setattr(pipeline, "build", stop)
    return seen


def test_plan_prints_the_build_it_planned_with_the_builds_defaults(tmp_path, monkeypatch):
    seen = _captured_build(monkeypatch)
    r = cli("build", "--model", "smollm2-135m", "--domain", "number", "--root", tmp_path)
    assert isinstance(r.exception, Captured), r.output
    from sveb.sample.plan import BUILD_FLAGS, build_defaults
    assert {k: getattr(seen[0], k) for k in BUILD_FLAGS if k != "max_tokens"} == \
        {k: v for k, v in build_defaults().items() if k != "max_tokens"}  # `sveb build`'s defaults are the config's
    assert seen[0].sampling.max_tokens == build_defaults()["max_tokens"]
    r = cli("plan", "--domains", "number", "--root", tmp_path, "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)
    assert p["build_commands"] == {"number": "sveb build --model smollm2-135m --domain number"}
    assert p["settings"]["problems"] == BuildConfig().problems  # plan's defaults are build's
    r = cli("plan", "--domains", "number,math", "--problems", "12", "--max-tokens", "1024", "--gpus", "2",
            "--root", tmp_path, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    commands = [x.strip() for x in r.output.splitlines() if x.strip().startswith("sveb build")]
    assert commands == [f"sveb build --model smollm2-135m --domain {d} --problems 12 --max-tokens 1024 --ray"
                        for d in ("number", "math")]
    seen.clear()
    r = cli(*commands[1].split()[1:-1], "--root", tmp_path)  # the printed command builds what was planned
    assert isinstance(r.exception, Captured), r.output
    assert (seen[0].domain, seen[0].problems, seen[0].sampling.max_tokens) == ("math", 12, 1024)


def test_no_build_names_the_committed_frozen_build(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    r = cli("eval", "-e", "grpo", "--root", tmp_path / "data")
    assert r.exit_code == 1 and "run `sveb build` first" in r.output and "frozen" not in r.output
    frozen = tmp_path / "results" / "table4" / "exports" / "math"
    frozen.mkdir(parents=True)
    (frozen / "manifest.json").write_text("{}")
    r = cli("eval", "-e", "grpo", "--domain", "math", "--root", tmp_path / "data")
    assert r.exit_code == 1 and "--build results/table4/exports/math" in " ".join(r.output.split())
    r = cli("compare", "-a", "grpo", "-b", "mcs-2", "--domain", "math", "--root", tmp_path / "data")
    assert r.exit_code == 1 and "--build results/table4/exports/math" in " ".join(r.output.split())
    number = tmp_path / "results" / "table4" / "exports" / "number"
    number.mkdir()
    (number / "manifest.json").write_text("{}")
    for args in (["leaderboard", "--out", tmp_path / "lb.csv"], ["report", "--out", tmp_path / "report"]):
        r = cli(*args, "--root", tmp_path / "data")
        assert r.exit_code == 1 and "--build results/table4/exports/number" in " ".join(r.output.split()), r.output


def test_announces_the_estimators_that_load_a_model():
    from sveb.cli.common import loads_model
    from sveb.estimators import entry
    assert not loads_model(entry("grpo")) and not loads_model(entry("mcs-2"))
    assert loads_model(entry("hista")) and loads_model(entry("probe")) and loads_model(entry("ppo-1"))
    text = " ".join(cli("ls", "estimators").output.split())
    grpo = text[text.index(" grpo "):text.index(" mcs-1 ")]
    hista = text[text.index(" hista "):text.index(" hista-sveb ")]
    assert "loads the model" in hista and "loads the model" not in grpo


def test_the_demo_writes_under_its_root_and_names_its_machine(tmp_path, monkeypatch):
    import sveb.experiment.demo as demo
    seen = []
    monkeypatch.setattr(demo, "run_demo", lambda root, results, *a, **k: seen.append((root, results)))
    assert cli("demo", "--root", tmp_path / "data").exit_code == 0
    assert seen[-1] == (tmp_path / "data", tmp_path / "data" / "demo")  # git-ignored: sveb_data/ by default
    assert cli("demo", "--root", tmp_path / "data", "--preset", "quick").exit_code == 0
    assert seen[-1][1].as_posix() == "results/quick"


@pytest.mark.slow
def test_made_by_names_each_builds_dtype_and_cpu(scripted_build):
    from sveb import store
    from sveb.experiment.demo import made_by
    _, bdir = scripted_build
    m = store.read_manifest(bdir)
    text = made_by([bdir], "demo")
    assert text.startswith("`sveb demo --preset demo`")
    assert f"build {m['build_fp']} (number): compute dtype {m['dtype']}, CPU flags {m['cpu_flags']}" in text


@pytest.mark.slow
def test_exports_anywhere_under_a_root_are_found_alike_and_stand_beside_the_published(scripted_build, tmp_path,
                                                                                      monkeypatch):
    """An export one level under a root: `ls builds` lists it, `eval` and `compare` find it; the committed
    estimates of the same build (by build_fp) join a comparison, and an estimator scored here wins over them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sveb import store
    from sveb.core import schema
    from sveb.score.compare import compare, with_published
    from sveb.score.pooling import load_view, read_scores
    from sveb.store.builds import find_build
    from sveb.store.export import export_build
    _, bdir = scripted_build
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    root = tmp_path / "results"
    ex = export_build(bdir, root / "number", model_dir=weights)
    r = cli("ls", "builds", "--root", root, env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "number" in r.output.split()
    assert find_build(root, "smollm2-135m", "number") == ex
    assert cli("eval", "-e", "grpo", "--root", root).exit_code == 0
    states = store.read_table(ex / "states", schema.STATES).column("state_id").to_pylist()
    refs = dict(zip(*(store.read_table(ex / "references", schema.REFERENCES).column(c).to_pylist()
                      for c in ("state_id", "value"))))
    fp = store.read_manifest(ex)["build_fp"]
    rows = [{"domain": "number", "build_fp": fp, "state_id": s, "estimator": name, "params_fp": "p",
             "protocol": "held-out", "value": v, "provenance": "test"}
            for s in states for name, v in (("oracle", refs[s]), ("grpo", 0.5))]
    rows.append({**rows[0], "build_fp": "other", "estimator": "elsewhere"})  # another build's: not read
    published = tmp_path / "estimates.parquet"
    pq.write_table(pa.Table.from_pylist(rows), published)
    view = load_view(ex, read_scores(ex))
    grpo_here = view.est[next(k for k in view.est if k[0] == "grpo")].copy()
    assert with_published(view, published) == ["oracle"]  # grpo was scored here: its own estimates win
    assert np.array_equal(view.est[next(k for k in view.est if k[0] == "grpo")], grpo_here)
    (row,) = compare(view, "oracle", ["grpo"])
    assert row["n_states"] == len(states) and row["delta_sq"] < 0  # the exact values beat the group mean
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "table4").mkdir()
    published.rename(tmp_path / "results" / "table4" / "estimates.parquet")
    r = cli("compare", "-a", "oracle", "-b", "grpo", "--root", "results", env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "oracle - grpo (held-out" in r.output, r.output
    r = cli("compare", "-a", "oracle", "-b", "grpo", "--root", "results", "--no-published")
    assert r.exit_code == 1 and "oracle: no held-out estimates" in " ".join(r.output.split())
    import csv
    for flag, shown in (("--published", {"grpo", "oracle"}), ("--no-published", {"grpo"})):
        r = cli("leaderboard", "--root", "results", "--out", tmp_path / "lb.csv", flag)
        assert r.exit_code == 0, r.output
        rows = {x["estimator"]: x for x in csv.DictReader(open(tmp_path / "lb.csv")) if x["protocol"] == "held-out"}
        assert set(rows) == shown
        if "oracle" in rows:  # the published values are the references themselves: scored as such
            assert float(rows["oracle"]["mae"]) == 0 and float(rows["oracle"]["delta_sq"]) < 0
        assert float(rows["grpo"]["mae"]) == pytest.approx(np.nanmean(np.abs(grpo_here - view.ref)), abs=1e-4)


def test_wide_metric_tables_keep_the_names_at_80_columns():
    """`sveb leaderboard --wide`'s metric tables split their columns over as many tables as 80 columns need, so no
    estimator name is squeezed out and no value is cut."""
    from rich.console import Console

    from sveb.core import metrics
    from sveb.present.leaderboard import metric_tables

    class Row(dict):  # every metric and CI bound present, with a long value
        def get(self, k, default=None):
            return super().get(k, -0.123456)
    names = {("hista-sveb", "a"): "hista-sveb", ("probe", "b"): "probe (layer=-4, pool=mean, relative=true)"}
    rs = [Row(estimator=e, params_fp=p) for e, p in names]
    for view in (metrics.TERMINAL, metrics.NEIGHBOURS):
        more = metrics.shown(view)
        con = Console(width=80, record=True)
        metric_tables("title", "caption", rs, names, more, con)
        out = con.export_text()
        assert "…" not in out and max(map(len, out.splitlines())) <= 80, out
        assert out.count("hista-sveb") == out.count("title") >= 2  # split, each part naming every estimator
        assert all(m.header in out for m in more)


def test_the_published_estimates_are_found_from_the_root_whatever_the_working_folder(tmp_path, monkeypatch):
    # the README's `sveb compare ... --root results/table4/exports` run from the folder of one's own module
    from sveb.score.compare import PUBLISHED, published_for
    clone = tmp_path / "clone"
    (clone / "results" / "table4" / "exports" / "number").mkdir(parents=True)
    (clone / "results" / "table4" / "estimates.parquet").write_bytes(b"x")
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    want = (clone / "results" / "table4" / "estimates.parquet").resolve()
    assert published_for(clone / "results" / "table4" / "exports") == want
    assert published_for(clone / "results") == want  # a root above it: the clone's results/table4/
    assert published_for(tmp_path / "other") == PUBLISHED  # none there: the working folder's, as before
