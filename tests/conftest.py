import os

os.environ.setdefault("SVEB_NO_WATCHDOG", "1")  # CliRunner runs commands in the pytest process

import json
from pathlib import Path

import pytest

from sveb.core.config import BuildConfig, SamplingConfig


def write_chain_source(path: Path) -> Path:
    """A local file in DAPO-Math's own schema with 'What is a + b?' questions the scripted engine answers."""
    rows = [{"prompt": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(1, 10) for b in range(1, 10)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


@pytest.fixture
def chain_source(tmp_path: Path) -> Path:
    return write_chain_source(tmp_path / "dapo.jsonl")


@pytest.fixture
def small_cfg(chain_source: Path) -> BuildConfig:
    return BuildConfig(domain="number", model="scripted", source=str(chain_source), problems=4, oversample=3,
                       rollouts=8, states_per_problem=2, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=3,
                       min_novel_numbers=0,
                       sampling=SamplingConfig(max_tokens=200), engine="scripted")


@pytest.fixture
def scripted_build(tmp_path: Path, small_cfg: BuildConfig):
    """(root, build dir) of a complete build made with the scripted engine."""
    from dataclasses import replace

    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    cfg = replace(small_cfg, model="smollm2-135m")  # a label here: the engine object is passed in
    root = tmp_path / "root"
    return root, build(cfg, root, engine=ScriptedEngine())


@pytest.fixture(scope="module")
def tiny_llama_builds(tmp_path_factory):
    """(root, train build, test build, model path) made with the scripted engine; the model is a tiny random
    Llama, so hidden states and critics are real and take seconds. One per test module."""
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    from test_critic import tiny_llama
    tmp = tmp_path_factory.mktemp("tiny-builds")
    src = write_chain_source(tmp / "dapo.jsonl")
    model = tiny_llama(tmp / "llama")
    root = tmp / "root"
    out = {}
    for split, seed in (("train", 4), ("test", 3)):  # disjoint splits: the probe and ppo-1 train on "train"
        cfg = BuildConfig(domain="number", model=model, source=str(src), split=split, problems=3, oversample=3,
                          rollouts=8, states_per_problem=2, mc=4, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=seed,
                          min_novel_numbers=0, sampling=SamplingConfig(max_tokens=120), engine="scripted")
        out[split] = build(cfg, root, engine=ScriptedEngine())
    return root, out["train"], out["test"], model
