"""A new engine is one file: a module written here (a class implementing sveb.engines.base.Engine) runs a build
through `sveb build --engine module:Class`, and through a (faked) entry point of the group `sveb.engines`, with no
edit to SVEB. The toy's values are known: a state whose prefix holds its guess has value 1 or 0."""

import json
from dataclasses import replace
from importlib.metadata import EntryPoint

import pyarrow.parquet as pq
from typer.testing import CliRunner

from sveb.cli import app
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.engines import EngineOptions, Request, registry
from sveb.sample.pipeline import build
from sveb.sample.rules import stage_fps
from tests.helpers.sources import write_chain_source

TOY = '''
"""A toy engine: characters are tokens; a response guesses the sum or the sum + 1, by its seed."""
import random
import re

from sveb.engines.base import Completion

class Chars:
    eos_token_id = 0
    def encode_chat(self, messages):
        return [ord(c) for c in "".join(m["content"] for m in messages) + "|A|"]
    def decode(self, ids):
        return "".join(chr(i) for i in ids)

class Toy:
    fingerprint = "{name}/v1"
    uses_model = False
    def __init__(self, options):
        self.tokenizer, self.options = Chars(), options
    def generate(self, requests, params, desc=""):
        out = []
        for r in requests:
            prompt, _, so_far = self.tokenizer.decode(r.prompt_token_ids).partition("|A|")
            gold = sum(int(x) for x in re.search(r"What is ([\\d +]+)\\?", prompt).group(1).split("+"))
            miss = int(so_far[6]) if len(so_far) > 6 else int(random.Random(r.seed).random() < 0.5)
            full = f"guess {miss}: the answer is \\\\boxed{{{gold + miss}}}."
            assert full.startswith(so_far), (so_far, full)
            cont = full[len(so_far):][: r.budget(params)]
            out.append(Completion(tuple(ord(c) for c in cont), "stop" if so_far + cont == full else "length"))
        return out
'''

FLAGS = dict(problems=3, oversample=1, rollouts=4, states_per_problem=2, mc=3, mc_extra=0, min_acc=0.0, max_acc=1.0,
             seed=5, min_novel_numbers=0)


def _toy_module(tmp_path, name: str):
    (tmp_path / f"{name}.py").write_text(TOY)


def _tables(bdir):
    read = {t: pq.read_table(bdir / t).to_pylist() for t in ("rollouts", "states", "references")}
    return read["rollouts"], read["states"], {r["state_id"]: r for r in read["references"]}


def _check_values(bdir):
    """Every continuation continues the state's own prefix: a prefix past the guess has the guess's value."""
    rollouts, states, refs = _tables(bdir)
    assert rollouts and all(r["response_text"].startswith("guess ") for r in rollouts)
    assert {r["reward"] for r in rollouts} <= {0.0, 1.0}
    decided = 0
    for s in states:
        if len(s["prefix_text"]) > 6:
            want = 1.0 if s["prefix_text"][6] == "0" else 0.0
            assert set(refs[s["state_id"]]["mc_rewards"]) == {want}, s["prefix_text"]
            decided += 1
    return decided


def test_sveb_build_runs_an_engine_given_as_module_class(tmp_path, monkeypatch):
    src = write_chain_source(tmp_path / "dapo.jsonl")
    _toy_module(tmp_path, "toy_engine_j1")
    monkeypatch.chdir(tmp_path)  # as a user runs it from the module's folder
    args = ["build", "--engine", "toy_engine_j1:Toy", "--root", str(tmp_path / "root"), "--domain", "number",
            "--source", str(src), "--max-tokens", "60", "--dtype", "float32"]
    args += [a for k, v in FLAGS.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    bdir = next((tmp_path / "root").glob("*/number/*/manifest.json")).parent
    manifest = json.loads((bdir / "manifest.json").read_text())
    assert manifest["config"]["engine"] == "toy_engine_j1:Toy" and manifest["status"] == "complete"
    assert _check_values(bdir) >= 1


def test_an_entry_point_engine_builds_and_its_name_is_in_the_fingerprint(tmp_path, monkeypatch):
    src = write_chain_source(tmp_path / "dapo.jsonl")
    _toy_module(tmp_path, "toy_engine_j2")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("toy", "toy_engine_j2:Toy", registry.GROUP)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: eps if group == registry.GROUP else [])
    monkeypatch.setattr(registry, "_PLUGINS", None)
    cfg = BuildConfig(domain="number", model="smollm2-135m", source=str(src), engine="toy", dtype="float32",
                      sampling=SamplingConfig(max_tokens=60), **FLAGS)
    assert registry.fingerprint_key(cfg) == "toy/v1"
    eng = registry.start("toy", EngineOptions(""))
    prompt = tuple(eng.tokenizer.encode_chat([{"role": "user", "content": "What is 2 + 3?"}]))
    reqs = [Request(prompt, seed) for seed in range(6)]
    alone = [eng.generate([r], cfg.sampling)[0] for r in reqs]
    assert eng.generate(reqs, cfg.sampling) == alone  # a sample follows from its seed, whatever the batch
    assert len({c.token_ids for c in alone}) == 2  # both guesses drawn
    other = stage_fps(replace(cfg, engine="toy_engine_j2:Toy"))
    assert other["problems"] == stage_fps(cfg)["problems"] and other["rollouts"] != stage_fps(cfg)["rollouts"]
    bdir = build(cfg, tmp_path / "root")
    assert bdir.name == stage_fps(cfg)["references"]
    assert _check_values(bdir) >= 1
    # a rerun finds every shard: nothing is sampled again (the engine's fingerprint is stable)
    def sampled():
        return {p: p.stat().st_mtime_ns for t in ("rollouts", "references") for p in (bdir / t).glob("part-*")}
    before = sampled()
    assert build(cfg, tmp_path / "root") == bdir
    assert before and sampled() == before
