"""benchmarks/hista_topk_ties.py: the tie queries of the conformance excerpt are dumped with the inputs of their
read-out, the stable sort (SVEB's rule) reproduces their expected values from those inputs alone, and topk's
picks are compared against it (CPU here; CUDA where there is one)."""

import importlib.util
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location("hista_topk_ties", HERE.parent / "benchmarks" / "hista_topk_ties.py")
ties = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ties)


def test_dumped_tie_rows_reproduce_the_expected_values(tmp_path):
    out = tmp_path / "ties.npz"
    n = ties.dump(HERE / "fixtures" / "conformance", out)
    assert n >= 1
    report = ties.run(out)
    assert report["cases"] == n
    assert report["stable sort reproduces expected (1e-6)"] == n
    z = np.load(out)
    # a dumped row is a tie where the k-th smallest clamped distance recurs past the k-th place
    ends = np.cumsum(z["lens"])
    tied = 0
    for i in range(n):
        d = np.sort(np.maximum(z["dist"][ends[i] - z["lens"][i]:ends[i]], z["clamp"][i]))
        k = int(z["k"][i])
        tied += len(d) > k and d[k - 1] == d[k]
    assert tied >= 1
    assert report["cpu"]["synthetic sweep"]["rows"] == 200


def test_the_value_follows_the_picked_neighbours():
    d = torch.tensor([5.0, 5.0, 5.0, 9.0])
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    v, idx = ties.value(d, r, 2, 5.0, 1.0, "stable")
    assert idx == [0, 1] and abs(v - 0.5) < 1e-7   # pool order: the first two tied
    v, idx = ties.value(d, r, 4, 5.0, 1.0, "topk")
    assert idx == [0, 1, 2, 3] and abs(v - (1 / 5 + 1 / 9) / (3 / 5 + 1 / 9)) < 1e-6
