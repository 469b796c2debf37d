"""tests/gpu_smoke.py, the script for the first GPU, runs end to end on a CPU at a tiny shape, in fp32
and in bf16 (the GPU's dtype, whose mixed-dtype paths crash on a CPU too)."""

import json

import pytest
from gpu_smoke import main


@pytest.mark.parametrize("dtype", ["bfloat16"])  # the GPU dtype; float32 runs the same code with no casts
def test_gpu_smoke_runs_on_cpu_at_a_tiny_shape(tmp_path, monkeypatch, dtype):
    monkeypatch.delenv("SVEB_DEVICE", raising=False)
    from sveb.core import device
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


def test_the_scaling_sweep_writes_one_json_and_stops_before_its_budget(tmp_path, monkeypatch):
    """`--sizes` at a tiny CPU shape: every step at each size with tokens, seconds per token, I/O bytes and the
    hidden pass's fraction of peak; a budget the second size would pass stops the sweep there, saying so."""
    monkeypatch.delenv("SVEB_DEVICE", raising=False)
    from sveb.core import device
    device.device.cache_clear()
    out, short = tmp_path / "scale.json", tmp_path / "short.json"
    base = ["--device", "cpu", "--dtype", "float32", "--shape", "tiny", "--tokens", "64", "--workdir", str(tmp_path)]
    try:
        rc = main(base + ["--sizes", "3,6", "--json", str(out), "--peak-flops", "1e12", "--profile"])
        rc_short = main(base + ["--sizes", "3,3000", "--budget-s", "20", "--json", str(short)])
        rc_mid = main(base + ["--sizes", "1500", "--budget-s", "8", "--json", str(tmp_path / "mid.json")])
    finally:
        device.device.cache_clear()
    res = json.loads(out.read_text())
    assert rc == 0 and res["finite"] and res["stopped"] is None and [s["rollouts"] for s in res["sizes"]] == [3, 6]
    assert set(res["growth"]) == {"hidden", "critic_fit", "critic_reuse", "pacs"}
    for size in res["sizes"]:
        h = size["steps"]["hidden"]
        assert h["tokens"] == size["tokens"] > size["rollouts"] * 50 and h["io_bytes"]["disk.write"] > 0
        assert 0 < h["fraction_of_peak"] < 1 and h["tokens_per_s"] > 0
        steps = size["steps"]
        assert steps["critic_fit"]["epochs_trained"] == 1 and steps["critic_reuse"]["epochs_trained"] == 0
    assert res["meta"]["cpu_flags"] is not None and res["meta"]["threads"] == 1
    prof = res["profile"]
    assert prof["rollouts"] == 3 and prof["wall_s"] > 0 and 0 < prof["host_ops_s"] and prof["top_host_ops"]
    cut = json.loads(short.read_text())
    assert rc_short == 0 and [s["rollouts"] for s in cut["sizes"]] == [3]
    assert cut["stopped"]["size"] == 3000 and cut["stopped"]["predicted_s"] > cut["stopped"]["left_s"]
    mid = json.loads((tmp_path / "mid.json").read_text())  # a size that outruns the budget is stopped inside it
    assert rc_mid == 0 and mid["sizes"] == [] and mid["stopped"]["size"] == 1500 and "during" in mid["stopped"]["why"]
    # which step the alarm lands in follows the machine's speed (an idle AVX-512 core finishes the hidden pass of
    # 1,500 rollouts inside 8 s): the steps done are the first ones in order, and not all of them
    order, done = ["hidden", "critic_fit", "critic_reuse", "pacs"], list(mid["stopped"]["partial_steps"])
    assert done == order[:len(done)] and len(done) < len(order) and not list(tmp_path.glob("tmp*"))
