import os

os.environ.setdefault("SVEB_NO_WATCHDOG", "1")  # CliRunner runs commands in the pytest process

import json
from pathlib import Path

import pytest

from sveb.config import BuildConfig, SamplingConfig


@pytest.fixture
def chain_source(tmp_path: Path) -> Path:
    """A local file in DAPO-Math's own schema with 'What is a + b?' questions the scripted engine answers."""
    path = tmp_path / "dapo.jsonl"
    rows = [{"prompt": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(1, 10) for b in range(1, 10)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


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
    from sveb.pipeline import build
    cfg = replace(small_cfg, model="smollm2-135m")  # a label here: the engine object is passed in
    root = tmp_path / "root"
    return root, build(cfg, root, engine=ScriptedEngine())
