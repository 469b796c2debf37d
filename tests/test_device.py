"""The compute dtype follows the hardware (issue 10): bf16 only where it is native."""

import pytest

from sveb.core.device import pick_dtype


def test_dtype_from_cpu_flags(monkeypatch):
    monkeypatch.delenv("SVEB_CPU_DTYPE", raising=False)
    assert pick_dtype("auto", gpu=False, flags=frozenset({"avx2", "fma"})) == "float32"       # AVX2-only EPYC
    assert pick_dtype("auto", gpu=False, flags=frozenset({"avx512f", "avx512_bf16"})) == "bfloat16"
    assert pick_dtype("auto", gpu=False, flags=frozenset({"amx_bf16", "amx_tile"})) == "bfloat16"
    assert pick_dtype("auto", gpu=False, flags=frozenset({"avx512f"})) == "float32"            # AVX-512, no bf16
    assert pick_dtype("auto", gpu=True, flags=frozenset()) == "bfloat16"
    assert pick_dtype("float32", gpu=True) == "float32"                                        # --dtype overrides
    with pytest.raises(ValueError, match="--dtype fp16"):
        pick_dtype("fp16")


def test_sveb_cpu_dtype_forces_what_auto_means_on_a_cpu_only(monkeypatch):
    # .ci/run reruns the scripted tests under the other kind of CPU's dtype with it
    avx2, bf16 = frozenset({"avx2", "fma"}), frozenset({"avx512f", "avx512_bf16"})
    monkeypatch.setenv("SVEB_CPU_DTYPE", "bfloat16")
    assert pick_dtype("auto", gpu=False, flags=avx2) == "bfloat16"
    assert pick_dtype("float32", gpu=False, flags=avx2) == "float32"  # an explicit --dtype still wins
    monkeypatch.setenv("SVEB_CPU_DTYPE", "float32")
    assert pick_dtype("auto", gpu=False, flags=bf16) == "float32"
    assert pick_dtype("auto", gpu=True, flags=bf16) == "bfloat16"  # a GPU is not a CPU
    monkeypatch.setenv("SVEB_CPU_DTYPE", "fp16")
    with pytest.raises(ValueError, match="SVEB_CPU_DTYPE=fp16"):
        pick_dtype("auto", gpu=False, flags=avx2)


def test_dtype_is_part_of_the_rollout_fingerprint(small_cfg):
    from dataclasses import replace

    from sveb.sample.pipeline import stage_fps
    a, b = stage_fps(replace(small_cfg, dtype="float32")), stage_fps(replace(small_cfg, dtype="bfloat16"))
    assert a["problems"] == b["problems"] and a["rollouts"] != b["rollouts"]
