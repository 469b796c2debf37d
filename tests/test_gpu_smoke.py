"""tests/gpu_smoke.py, the script for the first GPU, runs end to end on a CPU at a tiny shape, in fp32
and in bf16 (the GPU's dtype, whose mixed-dtype paths crash on a CPU too)."""

import json

import pytest

from gpu_smoke import main


@pytest.mark.parametrize("dtype", ["bfloat16"])  # the GPU dtype; float32 runs the same code with no casts
def test_gpu_smoke_runs_on_cpu_at_a_tiny_shape(tmp_path, monkeypatch, dtype):
    monkeypatch.delenv("SVEB_DEVICE", raising=False)
    from sveb.lm import device
    device.device.cache_clear()
    out = tmp_path / "rows.json"
    try:
        rc = main(["--device", "cpu", "--dtype", dtype, "--shape", "tiny", "--rollouts", "4", "--tokens", "96",
                   "--workdir", str(tmp_path), "--json", str(out)])
    finally:
        device.device.cache_clear()
    rows = {r["step"]: r for r in json.loads(out.read_text())}
    assert rc == 0 and len(rows) == 5 and all(r["finite"] and r["device"] == "cpu" and r["dtype"] == dtype
                                              for r in rows.values())
    fit, reuse = rows["critic fit (1 epoch)"], rows["critic checkpoint reuse"]
    assert fit["epochs_trained"] == 1 and reuse["epochs_trained"] == 0 and fit["checkpoint"] == reuse["checkpoint"]
    assert rows["hidden-state pass (resp + critic input, one group)"]["tokens"] > 4 * 80
