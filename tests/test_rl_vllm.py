"""`sveb rl --engine vllm`'s refresh on the real engine and the real default model: weights reloaded in place give
the samples a fresh engine on the same weights gives (so an in-place reload is a restart, only faster), the
prefix cache does not serve the old weights' keys, and repeated reloads do not grow the process."""

import pytest
import torch

pytestmark = pytest.mark.e2e


def rss_gb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1e6
    return float("nan")


def test_a_reload_in_place_samples_what_a_fresh_engine_on_the_weights_samples(tmp_path):
    from transformers import AutoModelForCausalLM

    from sveb.core.config import SamplingConfig
    from sveb.core.models import resolve
    from sveb.engines import Request
    from sveb.engines.vllm import VLLMEngine
    from sveb.experiment.rl.policy import ReloadingVLLM

    path = resolve("smollm2-135m")
    eng = ReloadingVLLM(path, "float32", str(tmp_path / "weights"))
    ids = tuple(eng.tokenizer.tok("Compute 37 * 12. Answer:")["input_ids"])
    reqs = [Request(ids, seed=100 + i) for i in range(12)]
    params = SamplingConfig(temperature=0.7, max_tokens=60)
    before = [c.token_ids for c in eng.generate(reqs, params)]  # fills the prefix cache with the base's keys
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    sizes = []
    for _ in range(3):  # as training does: the top layers move, the rest stays
        with torch.no_grad():
            for name, p in model.named_parameters():
                if ".layers.2" in name and int(name.split(".layers.")[1].split(".")[0]) >= 26:
                    p.add_(torch.randn(p.shape, generator=gen) * 0.02 * p.std())
        eng.refresh(model)
        after = [c.token_ids for c in eng.generate(reqs, params)]
        sizes.append(rss_gb())
    eng.close()
    assert sum(a != b for a, b in zip(before, after)) >= 4  # the reload took effect
    fresh = VLLMEngine(str(tmp_path / "weights"), max_model_len=2048, dtype="float32")
    try:
        assert [c.token_ids for c in fresh.generate(reqs, params)] == after
    finally:
        fresh.close()
    assert sizes[-1] - sizes[0] < 0.3  # a restart grew it ~1 GB each time
