"""What a CUDA machine would hit, caught on a CPU (issue 22): the device decision, vLLM's GPU settings,
GPU shares, fp32 log-probs over a bf16 body, checkpoint fingerprints, bf16 storage, model release.

Exact only on a CPU: the fp32-vs-bf16 comparisons below use tolerances; on a GPU bf16 kernels differ again.
"""

import shutil
import sys
import types
import weakref

import numpy as np
import pytest
import torch

from sveb.core import device
from sveb.core.device import Device, HardwareError, decide, visible
from sveb.lm.checkpoints import resident
from sveb.lm.critic import Critic, CriticConfig, make_seq
from tests.helpers.tiny_llama import seqs_two_problems, tiny_llama

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-gpu") / "llama", layers=3)


@pytest.fixture
def no_cuda_calls(monkeypatch):
    """Any in-process CUDA initialisation fails the test (it would break vLLM's forked TP workers)."""
    def boom(*a, **k):
        raise AssertionError("CUDA initialised in this process")
    monkeypatch.setattr(torch.cuda, "is_available", boom)
    monkeypatch.setattr(torch.cuda, "device_count", boom)
    monkeypatch.setattr(torch.cuda, "init", boom)


# ---- one device decision ----

def test_decide_every_disagreement():
    assert decide(0, None, 0, "cpu") == Device("cpu", "cpu", 0)
    assert decide(2, "13.0", 2, "cuda") == Device("cuda", "cuda", 2)
    assert decide(2, "13.0", 2, "cuda", want="cpu").torch == "cpu"          # SVEB_DEVICE=cpu on purpose
    with pytest.raises(HardwareError, match="torch is a CPU-only build") as e:  # a +cpu wheel on a GPU machine
        decide(1, None, 0, "cpu")
    assert "\n" not in str(e.value)
    with pytest.raises(HardwareError, match="cannot use them: is the driver too old"):
        decide(1, "13.0", 0, "cuda")
    with pytest.raises(HardwareError, match="no GPU is visible"):
        decide(0, None, 0, "cuda", want="cuda")
    with pytest.raises(ValueError, match="SVEB_DEVICE=gpu"):
        decide(0, None, 0, None, want="gpu")


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible(4, None) == 4
    assert visible(4, "") == 0          # a Ray actor given no GPU
    assert visible(4, "-1") == 0
    assert visible(4, "2,3") == 2


def test_device_is_decided_without_initialising_cuda_here(monkeypatch, no_cuda_calls):
    """nvidia-smi lists GPUs, torch says it has CUDA: whether torch can use them is asked in a subprocess
    (here, a CPU machine: it cannot, which is the one-line error)."""
    device.device.cache_clear()
    device.torch_gpus.cache_clear()
    monkeypatch.setattr(device, "nvidia_gpus", lambda: 2)
    monkeypatch.setattr(device, "torch_cuda", lambda: "13.0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SVEB_DEVICE", raising=False)
    try:
        with pytest.raises(HardwareError, match="lists 2 GPU"):
            device.device()
        monkeypatch.setenv("SVEB_DEVICE", "cpu")
        device.device.cache_clear()
        assert device.device().torch == "cpu"
    finally:
        device.device.cache_clear()
        device.torch_gpus.cache_clear()


def test_pick_dtype_asks_the_device_decision(monkeypatch):
    monkeypatch.setattr(device, "torch_device", lambda: "cuda")
    assert device.pick_dtype("auto", flags=frozenset()) == "bfloat16"
    monkeypatch.setattr(device, "torch_device", lambda: "cpu")
    assert device.pick_dtype("auto", flags=frozenset({"avx2"})) == "float32"


# ---- vLLM's GPU branch, with a stand-in vllm module ----

@pytest.fixture
def fake_vllm(monkeypatch):
    seen = {}

    class LLM:
        def __init__(self, **kw):
            seen["llm"] = kw

    class SamplingParams:
        def __init__(self, **kw):
            seen.setdefault("sp", []).append(kw)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    import sveb.engines.vllm as ev
    monkeypatch.setattr(ev, "HFTokenizer", lambda path: types.SimpleNamespace(eos_token_id=0))
    for k in ("VLLM_WORKER_MULTIPROC_METHOD", "VLLM_ENABLE_V1_MULTIPROCESSING", "SVEB_GPU_SHARE", "SVEB_REPRODUCIBLE",
              "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_CPU_KVCACHE_SPACE",
              "VLLM_USE_AOT_COMPILE", "VLLM_LOGGING_LEVEL"):
        monkeypatch.delenv(k, raising=False)
    return ev, seen


def test_vllm_gpu_tp_settings_without_cuda_in_the_parent(fake_vllm, monkeypatch, no_cuda_calls):
    ev, seen = fake_vllm
    monkeypatch.setattr(device, "device", lambda: Device("cuda", "cuda", 2))
    monkeypatch.setenv("SVEB_GPU_SHARE", "0.5")
    ev.VLLMEngine("m", tensor_parallel_size=2, gpu_memory_utilization=0.9, dtype="bfloat16")
    kw = seen["llm"]
    assert kw["tensor_parallel_size"] == 2 and kw["gpu_memory_utilization"] == pytest.approx(0.45)
    assert "enable_chunked_prefill" not in kw                     # no CPU-only settings on a GPU
    import os
    assert os.environ["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ     # vLLM's own engine process on a GPU


def test_vllm_cpu_settings_and_no_detokenising(fake_vllm, monkeypatch):
    ev, seen = fake_vllm
    monkeypatch.setattr(device, "device", lambda: Device("cpu", "cpu", 0))
    eng = ev.VLLMEngine("m", gpu_memory_utilization=0.9)
    assert seen["llm"]["enable_chunked_prefill"] is False and "gpu_memory_utilization" not in seen["llm"]
    from sveb.core.config import SamplingConfig
    from sveb.engines import Request
    eng.llm = types.SimpleNamespace(generate=lambda prompts, sps, use_tqdm: [
        types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=[5, 0], finish_reason="stop")])])
    out = eng.generate([Request((1, 2), seed=7)], SamplingConfig(max_tokens=4))
    assert out[0].token_ids == (5,) and seen["sp"][0]["detokenize"] is False


def test_cuda_vllm_without_a_usable_gpu_is_one_line(fake_vllm, monkeypatch):
    ev, _ = fake_vllm
    from sveb.engines import EngineError
    monkeypatch.setattr(device, "device", lambda: Device("cpu", "cuda", 0))
    with pytest.raises(EngineError, match="CUDA build of vLLM is installed but no GPU") as e:
        ev.VLLMEngine("m")
    assert "\n" not in str(e.value)


# ---- GPU shares on Ray ----

def test_fractional_gpus_per_worker():
    from sveb.core.errors import UsageError
    from sveb.sample.distributed import ray_options, worker_env
    assert worker_env(0, 0.5, 1) == {"SVEB_GPU_SHARE": "0.5"}     # vLLM takes half of its usual share
    assert worker_env(0, 1, 1) == {}
    assert ray_options("local", 2, 0.5, 1, 1).gpus_per_worker == 0.5
    for g, tp in ((0.5, 2), (1.5, 1), (1, 2)):
        with pytest.raises(UsageError, match="--gpus-per-worker"):
            ray_options("local", 2, g, 1, tp)


# ---- pacs over a bf16 body ----

def _pacs(tiny, dtype):
    from sveb.estimators.pacs import PacsConfig, PacsScorer, make_pseq
    scorer = PacsScorer(PacsConfig(model=tiny), tiny, device="cpu", dtype=dtype)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a "trained" policy: the same perturbation of the fp32 trained weights
        for p in scorer.model.trainable().parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    seqs = [make_pseq(s.key, "g", s.ids[:s.prompt_len], s.ids[s.prompt_len:] + (7,), s.reward)
            for s in seqs_two_problems(4)]
    return scorer.prefix_scores(seqs)


def test_pacs_log_probs_in_fp32_over_a_bf16_body(tiny):
    """On a GPU the body is bf16 and the trained norm fp32: the head saw fp32 input with bf16 weights
    ("expected m1 and m2 to have the same dtype"). The same on a CPU with a bf16 body."""
    bf = _pacs(tiny, "bfloat16")
    fp = _pacs(tiny, "float32")
    assert set(bf) == set(fp)
    for k in fp:
        assert np.all(np.isfinite(bf[k])) and np.any(fp[k] != 0)
        np.testing.assert_allclose(bf[k], fp[k], atol=0.05 + 0.05 * np.abs(fp[k]).max())  # bf16 body: close, not exact


# ---- critic checkpoints ----

def test_critic_checkpoint_is_not_reused_across_dtypes(tiny, tmp_path):
    cfg = CriticConfig(model=tiny, epochs=1, batch=4)
    seqs = seqs_two_problems(6)
    a = Critic(cfg, tiny, device="cpu", dtype="float32").fit(seqs, tmp_path, "k")
    epochs = []
    b = Critic(cfg, tiny, device="cpu", dtype="bfloat16").fit(seqs, tmp_path, "k",
                                                              on_epoch=lambda e, loss: epochs.append(e))
    assert a != b and epochs == [1]                      # the bf16 critic trained its own
    import json
    assert json.loads((b / "config.json").read_text())["dtype"] == "bfloat16"
    again = Critic(cfg, tiny, device="cpu", dtype="float32").fit(seqs, tmp_path, "k",
                                                                 on_epoch=lambda e, loss: epochs.append(e))
    assert again == a and epochs == [1]                  # the fp32 one is reused as before


def test_train_build_key_is_its_contents_not_its_name(tmp_path, small_cfg):
    from dataclasses import replace

    import pyarrow.parquet as pq

    from sveb import store
    from sveb.engines.scripted import ScriptedEngine
    from sveb.lm.checkpoints import build_key
    from sveb.sample.pipeline import build
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    tdir = build(replace(small_cfg, split="train"), tmp_path, engine=ScriptedEngine())
    manifest = store.read_manifest(bdir)
    from sveb.estimators import make
    from sveb.evaluate.context import context_for
    est = make("ppo-1", {"train_build": str(tdir)})
    key = est.cache_key(bdir, manifest, context_for(est, bdir, manifest))
    assert key.startswith(build_key(tdir))
    renamed = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(tdir, renamed)
    assert build_key(renamed) == build_key(tdir)          # a name or a path is not an identity
    shard = sorted((renamed / "rollouts").rglob("*.parquet"))[0]
    t = pq.read_table(shard)
    rewards = t.column("reward").to_pylist()
    t = t.set_column(t.schema.get_field_index("reward"), "reward", __import__("pyarrow").array(
        [1.0 - rewards[0]] + rewards[1:], type=t.schema.field("reward").type))
    pq.write_table(t, shard)
    assert build_key(renamed) != build_key(tdir)          # one flipped reward is another build


# ---- hidden states: bf16 storage, release, per-group reads ----

def test_bf16_activations_above_fp16_range_survive_storage(tiny, tmp_path, monkeypatch):
    from transformers import LlamaForCausalLM

    from sveb.lm.hidden import HiddenStates, from_store, to_store
    x = torch.tensor([1e5, -3e5, 1.5], dtype=torch.bfloat16)
    np.testing.assert_array_equal(from_store(to_store(x)), x.float().numpy())   # exact, no inf
    big = tmp_path / "big"
    m = LlamaForCausalLM.from_pretrained(tiny)
    with torch.no_grad():
        m.model.embed_tokens.weight.mul_(1e7)                # embeddings (layer 0) far above 65504
    m.save_pretrained(big)
    rows = [{"rollout_idx": 0, "prompt_token_ids": [1, 2, 3], "response_token_ids": [4, 5], "reward": 1.0}]
    hs = HiddenStates(tmp_path / "b", str(big), layer=0, dtype="bfloat16")
    got = hs.group("p", rows)[0]
    again = HiddenStates(tmp_path / "b", str(big), layer=0, dtype="bfloat16").group("p", rows)[0]  # read back
    want = m.to(torch.bfloat16).model.embed_tokens.weight[[4, 5]].float().detach().numpy()
    assert np.all(np.isfinite(got)) and np.abs(got).max() > 65504
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(again, want)


def test_hidden_pass_model_is_released_after_its_pass(scripted_build, monkeypatch, tiny):
    from sveb.estimators import make
    from sveb.lm.hidden import HiddenStates, hidden_provider
    from sveb.store.builds import load_build
    monkeypatch.setattr("sveb.core.models.resolve", lambda spec: tiny)
    _, bdir = scripted_build
    loaded = []
    real = HiddenStates._load_model
    monkeypatch.setattr(HiddenStates, "_load_model", lambda self: loaded.append(self) or real(self))
    provider = hidden_provider(make("hista", {}), load_build(bdir))
    assert loaded and all(hs._model is None for hs in loaded) and provider is not None


def test_one_resident_critic_model(tiny):
    cfg = CriticConfig(model=tiny)
    first = resident(("critic", "x"), lambda: Critic(cfg, tiny, device="cpu"))
    assert resident(("critic", "x"), lambda: pytest.fail("reloaded")) is first
    ref = weakref.ref(first)
    del first
    resident(("pacs", "x"), lambda: Critic(cfg, tiny, device="cpu"))   # pacs's model replaces ppo's
    assert ref() is None


def test_shared_features_read_each_rollout_not_its_group(tiny, tmp_path, monkeypatch):
    """Micro-batches of one rollout each read that rollout's bytes only: a whole-group read per micro-batch grew
    as rollouts x group size (issue 60), and a group cache only hid it until a group outgrew the cache."""
    from sveb.lm import timers
    from sveb.lm.hidden import SharedFeatures
    from tests.helpers.tiny_llama import rollouts
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    rows = {"p0": rollouts(), "p1": rollouts(3, seed=1)}
    shared = SharedFeatures(tiny, -2)
    shared.add("fp", tmp_path / "b", rows)
    seqs = [make_seq(("fp", pid, r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], 0.0)
            for pid in rows for r in rows[pid]]
    whole = shared(seqs)  # computes and stores
    shared.release()
    before = timers.snapshot()
    for s in seqs:                # micro-batches of one rollout each
        got = shared([s])
        np.testing.assert_array_equal(got[s.key].numpy(), whole[s.key].numpy())
    width = whole[seqs[0].key].shape[1]
    stored = sum((len(r["prompt_token_ids"]) + len(r["response_token_ids"])) * width * 4
                 for g in rows.values() for r in g)
    assert timers.since(before)["bytes"]["disk.read"] == stored   # each rollout's bytes once, nothing more


def test_hidden_cache_is_written_uncompressed_and_old_compressed_caches_still_read(tmp_path):
    """zlib cost 94% of a GPU pass for 7% less disk (docs/scaling.md): groups are stored uncompressed, and a
    group written compressed by an earlier version reads back the same."""
    import io
    import zipfile

    from sveb.lm.hidden import read_group_file, write_group_file
    arrays = {0: np.arange(12, dtype=np.float32).reshape(3, 4), 3: np.ones((2, 4), dtype=np.uint16)}
    write_group_file(tmp_path / "g.npz", arrays)
    with zipfile.ZipFile(tmp_path / "g.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    buf = io.BytesIO()
    np.savez_compressed(buf, **{f"r{k}": v for k, v in arrays.items()})
    (tmp_path / "old.npz").write_bytes(buf.getvalue())
    new, old = read_group_file(tmp_path / "g.npz"), read_group_file(tmp_path / "old.npz")
    assert sorted(new) == sorted(old) == [0, 3]
    for k in new:
        np.testing.assert_array_equal(new[k], old[k])
    np.testing.assert_array_equal(new[0], arrays[0])
