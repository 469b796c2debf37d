"""`sveb rl-export`: a run's policy as a model folder. A tiny random Llama (tied embeddings, a ChatML tokenizer) is
trained two steps by the RL loop on the scripted engine; its export loads with transformers and gives the in-memory
policy's logits, SVEB's model resolution takes it, and `sveb build`/`sveb eval` run on it. Bad input: one line."""

import dataclasses
import json

import pytest
import torch
from typer.testing import CliRunner

from sveb.cli import app
from sveb.engines.scripted import ScriptedEngine
from sveb.experiment.rl import RLConfig, run
from tests.helpers.rl import problems, tiny_llama
from tests.helpers.tiny_prm import tiny_tokenizer

torch.set_num_threads(1)

CFG = RLConfig(baseline="grpo", steps=2, seed=5, problems=2, rollouts=4, cuts=1, max_tokens=60, lr=1e-2,
               train_layers=1, eval_every=2, eval_problems=2, dtype="float32")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(run folder, base folder, the trained in-memory policy)."""
    from transformers import AutoModelForCausalLM
    tmp = tmp_path_factory.mktemp("rl-export")
    base = tmp / "base"
    tiny_llama(vocab=512).save_pretrained(base)
    tiny_tokenizer(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    cfg = dataclasses.replace(CFG, model=str(base))
    run(cfg, tmp / "run", ScriptedEngine(), model, problems(4), problems(2, offset=20))
    return tmp / "run", base, model


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits


def test_the_export_gives_the_trained_policys_logits_and_resolves(trained, tmp_path):
    from transformers import AutoModelForCausalLM

    from sveb.core.models import check_model, resolve
    from sveb.engines.base import HFTokenizer
    from sveb.sample.rules import model_identity
    run_dir, base, model = trained
    res = CliRunner().invoke(app, ["rl-export", str(run_dir), "--out", str(tmp_path / "pol")])
    assert res.exit_code == 0, res.output
    out = tmp_path / "pol"
    assert "step 2" in res.output and (out / "model.safetensors").exists()
    exported = AutoModelForCausalLM.from_pretrained(out).eval()
    assert next(exported.parameters()).dtype == torch.float32  # the trained fp32 weights, not a bf16 copy
    ids = [5, 17, 99, 300, 2, 41, 7]
    torch.testing.assert_close(logits(exported, ids), logits(model, ids), rtol=0, atol=1e-6)
    untrained = AutoModelForCausalLM.from_pretrained(base).eval()
    assert not torch.allclose(logits(untrained, ids), logits(model, ids))  # the steps moved the policy
    msgs = [{"role": "user", "content": "What is 3 + 4?"}]
    assert HFTokenizer(str(out)).encode_chat(msgs) == HFTokenizer(str(base)).encode_chat(msgs)  # chat template kept
    rec = json.loads((out / "sveb_policy.json").read_text())
    assert rec["step"] == 2 and rec["base_model"] == str(base) and rec["run"] == str(run_dir.resolve())
    import hashlib
    want = hashlib.sha256((run_dir / "ckpt" / "step-2" / "policy.pt").read_bytes()).hexdigest()
    assert rec["checkpoint_sha256"] == want
    assert check_model(str(out)) == str(out) and resolve(str(out)) == str(out.resolve())
    assert model_identity(str(out)).startswith("weights:")  # a build on it is keyed on these weights


def test_build_and_eval_take_the_exported_folder(trained, tmp_path):
    run_dir, _, _ = trained
    pol, root = tmp_path / "pol", tmp_path / "root"
    assert CliRunner().invoke(app, ["rl-export", str(run_dir), "--out", str(pol)]).exit_code == 0
    res = CliRunner().invoke(app, ["build", "--model", str(pol), "--engine", "hf", "--dtype", "float32",
                                   "--problems", "1", "--oversample", "1", "--rollouts", "2", "--states-per-problem",
                                   "1", "--mc", "2", "--mc-extra", "0", "--min-acc", "0", "--max-acc", "1",
                                   "--max-tokens", "6", "--root", str(root)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["eval", "-e", "grpo", "--model", str(pol), "--root", str(root)])
    assert res.exit_code == 0, res.output


def test_bad_runs_and_missing_checkpoints_are_one_line_errors_naming_the_path(trained, tmp_path):
    run_dir, _, _ = trained

    def fails(*args):
        res = CliRunner().invoke(app, ["rl-export", *map(str, args)])
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
        return res.output
    assert "no such run folder" in fails(tmp_path / "nope", "--out", tmp_path / "o")
    (tmp_path / "empty").mkdir()
    assert f"{tmp_path / 'empty' / 'config.json'}: missing" in " ".join(fails(tmp_path / "empty", "--out",
                                                                              tmp_path / "o").split())
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "config.json").write_text((run_dir / "config.json").read_text())
    assert "no checkpoint" in fails(fresh, "--out", tmp_path / "o")
    assert "only the newest is kept: step 2" in fails(run_dir, "--step", 1, "--out", tmp_path / "o")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    assert "not an empty folder" in fails(run_dir, "--out", tmp_path / "full")
    assert not (tmp_path / "o").exists()
