"""End to end on the real default model (SmolLM2-135M-Instruct): vLLM build -> eval -> leaderboard,
the hf engine, and hidden states. Slow: marked e2e (`make test-fast` skips them)."""

import subprocess
import sys

import numpy as np
import pytest

from sveb import store
from sveb.core.models import resolve

pytestmark = pytest.mark.e2e

TINY = ["--problems", "2", "--oversample", "2", "--rollouts", "6", "--states-per-problem", "2", "--mc", "4",
        "--mc-extra", "2", "--max-tokens", "48", "--min-acc", "0", "--max-acc", "1"]


def sveb(*args, timeout=900):
    r = subprocess.run([sys.executable, "-m", "sveb.cli", *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@pytest.fixture(scope="module")
def vllm_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    sveb("build", "--root", str(root), "--eager", *TINY)
    builds = store.list_builds(root)
    assert len(builds) == 1
    return root, builds[0]


def test_vllm_build_tables(vllm_build):
    from transformers import AutoTokenizer
    root, bdir = vllm_build
    tok = AutoTokenizer.from_pretrained(resolve("smollm2-135m"))
    m = store.read_manifest(bdir)
    assert m["status"] == "complete" and m["n_problems"] == 2 and m["n_states"] == 4
    kept = {p["problem_id"] for p in store.read_table(bdir / "problems").to_pylist()}
    rollouts = store.read_table(bdir / "rollouts").to_pylist()
    # an open filter screens nothing: the first 2 candidates are kept and only they are rolled out
    assert len(rollouts) == 2 * 6 and all(r["problem_id"] in kept for r in rollouts)
    assert not (bdir / "screens").exists()
    for r in rollouts:
        assert r["reward"] in (0.0, 1.0)
        assert 0 < len(r["response_token_ids"]) <= 48
        assert r["response_text"] == tok.decode(r["response_token_ids"], skip_special_tokens=True)
        assert tok.eos_token_id not in r["response_token_ids"]
    assert len({tuple(r["response_token_ids"]) for r in rollouts}) > 3  # distinct seeds, distinct samples
    refs = store.read_table(bdir / "references").to_pylist()
    assert len(refs) == 4 and all(len(r["mc_rewards"]) == 4 and len(r["extra_rewards"]) == 2 for r in refs)


def test_eval_and_leaderboard(vllm_build, tmp_path):
    root, bdir = vllm_build
    out = sveb("eval", "--root", str(root), "-e", "grpo", "-e", "mcs-1", "--protocol", "in-group",
               "--protocol", "held-out")
    assert "grpo" in out and "mcs-1" in out and "oracle floor" in out
    csv = tmp_path / "lb.csv"
    sveb("leaderboard", "--root", str(root), "--out", str(csv))
    lines = csv.read_text().splitlines()
    assert lines[0].startswith("model,domain,estimator") and len(lines) == 1 + 4
    scores = store.read_table(bdir / "scores").to_pylist()
    assert all(0 <= s["mae"] <= 1 and s["mae_ci_low"] <= s["mae"] <= s["mae_ci_high"] for s in scores)


def test_complete_build_rerun_starts_no_engine(vllm_build):
    root, bdir = vllm_build
    r = subprocess.run([sys.executable, "-c", (
        f"import sys; from sveb.cli import app; sys.argv=['sveb','build','--root',{str(root)!r}] + {TINY!r}\n"
        "try: app()\nexcept SystemExit: pass\n"
        "print('vllm' in sys.modules)")],
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("False")


def test_same_config_gives_the_same_build(vllm_build, tmp_path):
    """Reproducible: the same config in a fresh process samples the same tokens (vLLM's engine core runs
    in-process, so batches do not depend on timing)."""
    root, bdir = vllm_build
    sveb("build", "--root", str(tmp_path), "--eager", *TINY)
    (again,) = store.list_builds(tmp_path)
    assert again.name == bdir.name
    for table, cols in (("rollouts", ("problem_id", "rollout_idx", "response_token_ids", "reward")),
                        ("references", ("state_id", "mc_rewards", "extra_rewards", "finish_reasons"))):
        def rows(b, table=table, cols=cols):
            return sorted(tuple(str(r[c]) for c in cols) for r in store.read_table(b / table).to_pylist())
        assert rows(again) == rows(bdir), table


def test_hf_engine_build(tmp_path):
    out = sveb("build", "--root", str(tmp_path), "--engine", "hf", "--problems", "1", "--oversample", "1",
               "--rollouts", "3", "--states-per-problem", "1", "--mc", "2", "--mc-extra", "1", "--max-tokens", "24",
               "--min-acc", "0", "--max-acc", "1")
    assert '"status": "complete"' in out
    bdir = store.list_builds(tmp_path)[0]
    assert len(store.read_table(bdir / "rollouts")) == 3


def test_hidden_states_batched_equal_single(vllm_build):
    """Right-padded batches must give the same response hidden states as one sequence alone."""
    import torch
    from transformers import AutoModelForCausalLM

    from sveb.lm.hidden import HiddenStates
    root, bdir = vllm_build
    rollouts = store.read_table(bdir / "rollouts").to_pylist()[:4]
    hs = HiddenStates(bdir, "smollm2-135m")
    batched = hs.compute(rollouts)
    model = AutoModelForCausalLM.from_pretrained(resolve("smollm2-135m"), dtype=torch.float32)
    for r in rollouts:
        ids = torch.tensor([r["prompt_token_ids"] + r["response_token_ids"]])
        with torch.no_grad():
            h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, len(r["prompt_token_ids"]):]
        got = batched[r["rollout_idx"]].astype(np.float32)
        assert got.shape == tuple(h.shape)
        assert np.abs(got - h.numpy()).max() < 0.05 * max(1.0, float(h.abs().max()))
    # cached on disk, second call reads the file
    a = hs.group("p", rollouts)
    assert (hs.dir / "p.npz").exists() and set(hs.group("p", rollouts)) == set(a)


def test_prompt_states_and_start_token_as_the_authors_find_them(vllm_build):
    """Hista's extra inputs on the real model: the start token ends `<|im_start|>assistant` (the authors' rule), and
    the prompt's states from a prompt-only pass equal the prompt positions of a full prompt + response pass."""
    import torch
    from transformers import AutoModelForCausalLM

    from sveb.lm.hidden import HiddenStates
    root, bdir = vllm_build
    r = store.read_table(bdir / "rollouts").to_pylist()[0]
    hs = HiddenStates(bdir, "smollm2-135m")
    ids = r["prompt_token_ids"]
    start = hs.start_token(ids)
    assert hs._tok.decode(ids[: start + 1]).endswith("<|im_start|>assistant")
    assert not hs._tok.decode(ids[:start]).endswith("<|im_start|>assistant")
    prompt = hs.prompt_states("p", [r])
    model = AutoModelForCausalLM.from_pretrained(resolve("smollm2-135m"), dtype=torch.float32)
    with torch.no_grad():
        full = model(input_ids=torch.tensor([ids + r["response_token_ids"]]), output_hidden_states=True)
    h = full.hidden_states[-1][0, : len(ids)].numpy()
    assert prompt.shape == h.shape and np.abs(prompt - h).max() < 0.05 * max(1.0, float(np.abs(h).max()))
