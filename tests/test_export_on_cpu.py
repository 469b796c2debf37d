"""Frozen builds: export a scripted build, load it with datasets and pandas, score on it, refuse a tampered one."""

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.evaluate import evaluate
from sveb.store.builds import find_build, load_build
from sveb.store.export import ExportError, check_weights, export_build, verify, weights_hash
from sveb.store.hub import import_build

SCORE_KEYS = ("n_states", "n_problems", "mae", "mae_ci_low", "mae_ci_high", "rmse", "debiased_mse", "ref_noise",
              "oracle_floor", "own_share", "build_fp", "params_fp")


@pytest.fixture
def weights(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"weights of the model that sampled the build")
    (d / "config.json").write_text("{}")
    return d


@pytest.fixture
def exported(scripted_build, weights, tmp_path):
    root, bdir = scripted_build
    return root, bdir, export_build(bdir, tmp_path / "export", model_dir=weights)


def test_export_reads_with_pandas_and_datasets_and_keeps_the_content_hash(exported, weights):
    import datasets
    root, bdir, ex = exported
    manifest = json.loads((ex / "manifest.json").read_text())
    assert set(manifest["export"]["tables"]) >= {"problems", "rollouts", "states", "references"}
    assert manifest["export"]["content_hash"] == store.content_hash(bdir)  # the same rows as the build
    assert manifest["export"]["model_weights_sha256"] == weights_hash(weights)
    assert not (ex / "hidden").exists() and not (ex / "candidates").exists()
    for t, info in manifest["export"]["tables"].items():
        df = pd.read_parquet(ex / t)
        assert len(df) == info["rows"] == store.read_table(bdir / t).num_rows
    refs = datasets.load_dataset(str(ex), "references", split="test", cache_dir=str(ex.parent / "hf"))
    want = {r["state_id"]: r for r in store.read_table(bdir / "references").to_pylist()}
    assert len(refs) == len(want)
    for r in refs:
        assert r["mc_rewards"] == pytest.approx(want[r["state_id"]]["mc_rewards"])
        assert r["finish_reasons"] == want[r["state_id"]]["finish_reasons"]
    rolls = pd.read_parquet(ex / "rollouts")
    assert {"prompt_token_ids", "response_token_ids", "response_text", "reward", "finish_reason"} <= set(rolls.columns)
    header = yaml.safe_load((ex / "README.md").read_text().split("---")[1])
    assert {c["config_name"] for c in header["configs"]} == set(manifest["export"]["tables"])
    card = (ex / "README.md").read_text()
    assert weights_hash(weights) in card and manifest["build_fp"] in card and "cut off by the token budget" in card


def test_scores_on_the_export_equal_the_builds(exported):
    root, bdir, ex = exported
    for name in ("grpo", "mcs-2"):
        for protocol in ("held-out", "in-group"):
            a, b = evaluate(bdir, name, {}, protocol), evaluate(ex, name, {}, protocol)
            assert {k: a[k] for k in SCORE_KEYS} == pytest.approx({k: b[k] for k in SCORE_KEYS}, nan_ok=True)
    assert (ex / "scores").exists() and not (bdir / "scores" / "nothing").exists()


def test_a_tampered_table_is_refused_naming_it(exported, tmp_path):
    root, bdir, ex = exported
    path = next((ex / "references").glob("part-*.parquet"))
    t = pq.read_table(path).to_pylist()
    t[0]["value"] = 0.125 if t[0]["value"] != 0.125 else 0.375  # always an edit (1 - v is none at v = 0.5)
    pq.write_table(pq.read_table(path).from_pylist(t, schema=pq.read_schema(path)), path)
    with pytest.raises(ExportError, match="table references does not match"):
        find_build(root, None, None, str(ex))
    with pytest.raises(ExportError, match="table references"):
        load_build(ex)
    r = CliRunner().invoke(app, ["eval", "--build", str(ex), "-e", "grpo"])
    assert r.exit_code == 1 and "table references does not match its content hash" in r.output
    assert "Traceback" not in r.output


def test_a_missing_table_is_refused(exported):
    import shutil
    root, bdir, ex = exported
    shutil.rmtree(ex / "states")
    with pytest.raises(ExportError, match="table states is missing"):
        verify(ex)


def test_hidden_state_model_must_have_the_cards_weights(exported, weights, tmp_path):
    root, bdir, ex = exported
    manifest = store.read_manifest(ex)
    check_weights(ex, manifest, weights)  # the same bytes: accepted
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.safetensors").write_bytes(b"weights of the model that sampled the build!")
    with pytest.raises(ExportError, match="weights sha256 .* the export's card says"):
        check_weights(ex, manifest, other)
    check_weights(bdir, store.read_manifest(bdir), other)  # a build made here carries no card: nothing to check


def test_export_refuses_a_non_empty_folder_and_an_incomplete_build(scripted_build, weights, tmp_path):
    root, bdir = scripted_build
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        export_build(bdir, busy, model_dir=weights)
    assert (busy / "keep.txt").read_text() == "mine"
    m = store.read_manifest(bdir)
    store.write_manifest(bdir, {**m, "status": "running"})
    with pytest.raises(ExportError, match="not complete"):
        export_build(bdir, tmp_path / "x", model_dir=weights)
    assert not (tmp_path / "x").exists()


def test_import_through_datasets_from_a_local_folder(exported, tmp_path):
    root, bdir, ex = exported
    got = import_build(str(ex), tmp_path / "imported")
    assert store.content_hash(got) == store.content_hash(bdir)
    a, b = evaluate(bdir, "grpo", {}, "held-out"), evaluate(got, "grpo", {}, "held-out")
    assert a["mae"] == pytest.approx(b["mae"]) and a["mae_ci_high"] == pytest.approx(b["mae_ci_high"])


def test_cli_export_eval_leaderboard_on_the_folder(scripted_build, weights, tmp_path, monkeypatch):
    root, bdir = scripted_build
    runner = CliRunner()
    ex = tmp_path / "cli-export"
    r = runner.invoke(app, ["export", "--root", str(root), "--build", bdir.name[:8], "--out", str(ex),
                            "--model-dir", str(weights)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "--build", str(ex), "-e", "grpo"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["leaderboard", "--build", str(ex), "--out", str(tmp_path / "lb.csv")])
    assert r.exit_code == 0, r.output
    rows = list(pd.read_csv(tmp_path / "lb.csv").itertuples())
    assert [x.estimator for x in rows] == ["grpo"]
    r = runner.invoke(app, ["import", str(ex), "--out", str(tmp_path / "imp")])
    assert r.exit_code == 0, r.output
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # as on a machine without the hub
    r = runner.invoke(app, ["eval", "--build", "hub:nobody/none", "--root", str(tmp_path / "r")])
    assert r.exit_code == 1 and "nobody/none" in r.output and "Traceback" not in r.output


def test_an_export_restored_into_a_root_is_used_not_resampled(exported, small_cfg, tmp_path):
    """`sveb build`/`sveb demo` on a root holding an export at the build's place read it; no engine is touched."""
    import shutil
    from dataclasses import replace

    from sveb.sample.pipeline import build, locate
    root, bdir, ex = exported
    cfg = replace(small_cfg, model="smollm2-135m")
    root2 = tmp_path / "restored"
    place = locate(cfg, root2)
    assert place.name == bdir.name
    shutil.copytree(ex, place)
    before = json.loads((place / "manifest.json").read_text())

    class NoEngine:  # any sampling call is a failure
        def __getattr__(self, name):
            raise AssertionError(f"the engine was used ({name}) on a frozen export")

    assert build(cfg, root2, engine=NoEngine()) == place
    assert json.loads((place / "manifest.json").read_text()) == before
    assert not (place / "candidates").exists()
    verify(place)
    (place / "states" / "part-00000.parquet").write_bytes(b"not parquet")  # a tampered export is refused, not rebuilt
    with pytest.raises(ExportError, match="states"):
        build(cfg, root2, engine=NoEngine())


def test_a_same_size_edit_in_the_same_timestamp_tick_is_still_caught(exported, monkeypatch):
    """verify() skips re-hashing while each file's (size, mtime) is unchanged; an edit within the timestamp tick
    of the last write can leave both unchanged, so files younger than RACY_S are hashed every time."""
    import sveb.store.export as export
    root, bdir, ex = exported
    verify(ex)
    stamp = export._stamp(Path(ex).resolve(), export.check_export_manifest(Path(ex).resolve(),
                                                                          store.read_manifest(ex)))
    monkeypatch.setattr(export, "_stamp", lambda b, names: stamp)  # the edit below leaves the stamp as it was
    path = next((ex / "references").glob("part-*.parquet"))
    t = pq.read_table(path).to_pylist()
    t[0]["value"] = 0.125 if t[0]["value"] != 0.125 else 0.375  # the same size, and always an edit
    pq.write_table(pq.read_table(path).from_pylist(t, schema=pq.read_schema(path)), path)
    with pytest.raises(ExportError, match="table references does not match"):
        verify(ex)


def test_old_unchanged_files_are_hashed_once(exported, monkeypatch):
    import os

    import sveb.store.export as export
    root, bdir, ex = exported
    old = 1_000_000_000 * 10**9  # 2001: long past any timestamp tick
    for p in ex.rglob("part-*.parquet"):
        os.utime(p, ns=(old, old))
    calls = []
    real = store.table_hash
    monkeypatch.setattr(export.store, "table_hash", lambda d: calls.append(d) or real(d))
    verify(ex)
    n = len(calls)
    verify(ex)
    assert n > 0 and len(calls) == n
