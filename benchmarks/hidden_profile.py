"""Where the hidden-state pass's time goes at Qwen2.5-3B's shape on a CUDA GPU (one group of 40 x ~4k tokens, as
tests/gpu_smoke.py).

    PYTHONPATH=. python3 benchmarks/hidden_profile.py     # prints the pass's seconds and cProfile's top entries
"""
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

os.environ["SVEB_DEVICE"] = "cuda"
sys.path.insert(0, os.getcwd())
import torch

from sveb.lm.hidden import HiddenStates
from tests.gpu_smoke import SHAPES, make_model, make_rollouts

tmp = Path(tempfile.mkdtemp())
path = make_model("qwen2.5-3b", "bfloat16", tmp / "model", "cuda")
rows = make_rollouts(40, 4096, SHAPES["qwen2.5-3b"]["vocab_size"])
hs = HiddenStates(tmp / "build", path, layer=-1, dtype="bfloat16")
hs.group("warm", rows[:2])
torch.cuda.synchronize()
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
hs.group("p0", rows)
torch.cuda.synchronize()
prof.disable()
print(f"group pass: {time.perf_counter() - t:.1f} s", flush=True)
pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
pstats.Stats(prof).sort_stats("tottime").print_stats(15)
