"""The device and dtype rules now live in sveb.core.device (so the engines need nothing from lm); this old path
still hands them on for code written against it. Patch sveb.core.device, not this module."""

from sveb.core.device import (  # noqa: F401
    DEVICES,
    DTYPES,
    Device,
    HardwareError,
    cpu_flags,
    decide,
    describe,
    device,
    empty_cache,
    gpu_share,
    native_bf16,
    nvidia_gpus,
    pick_dtype,
    torch_cuda,
    torch_device,
    torch_gpus,
    visible,
    vllm_build,
)
