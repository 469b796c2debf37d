"""`make setup`'s GPU branch: the saved dry-run resolution of the Makefile's pins (tools/cuda_resolution.py,
resolved from PyPI metadata on a CPU machine) gives one CUDA torch at the CPU side's version, kept by vLLM."""

import copy
import json
from pathlib import Path

from tools.cuda_resolution import main, makefile_pins, problems

ROOT = Path(__file__).resolve().parent.parent
SAVED = json.loads((ROOT / "tests" / "data" / "cuda_resolution.json").read_text())


def test_saved_resolution_is_of_the_makefiles_pins_and_is_sound(capsys):
    pins = makefile_pins((ROOT / "Makefile").read_text())
    assert SAVED["pins"] == pins  # a pin bumped in the Makefile needs a fresh `--save`
    assert main(["--report", str(ROOT / "tests" / "data" / "cuda_resolution.json")]) == 0
    assert "ok:" in capsys.readouterr().out


def test_problems_catch_a_cpu_torch_and_a_vllm_that_pins_another_torch():
    pins, rows = SAVED["pins"], SAVED["packages"]
    assert problems(rows, pins) == []
    cpu = copy.deepcopy(rows)
    t = next(r for r in cpu if r["name"] == "torch")
    t["version"], t["file"] = "2.13.0+cpu", "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    cpu = [r for r in cpu if not r["name"].startswith("nvidia-")]
    got = problems(cpu, pins)
    assert any("2.13.0+cpu" in p for p in got) and any("nvidia-cuda-runtime" in p for p in got)
    newer = copy.deepcopy(rows)
    v = next(r for r in newer if r["name"] == "vllm")
    v["version"], v["torch_pins"] = "0.33.0", ["torch==2.14.0"]
    got = problems(newer, pins)
    assert any("vllm ['0.33.0']" in p for p in got) and any("torch==2.14.0" in p for p in got)
