"""Issue 31 (parts 1 and 3) on the scripted engine: the Hista/Numca authors' protocol as a preset (`--preset paper`),
and builds that carry their protocol and never pool across protocols."""

import itertools
import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, SamplingConfig, protocol_of
from sveb.core.errors import BuildError
from sveb.engines.scripted import CharTokenizer, ScriptedEngine
from sveb.evaluate import evaluate
from sveb.present import leaderboard
from sveb.sample import paper
from sveb.sample.pipeline import build
from sveb.sample.rules import stage_fps
from sveb.score import paper_rows
from sveb.store.builds import pool_key
from tests.helpers.engines import Recording


@pytest.fixture(scope="module")
def paper_cfg(tmp_path_factory) -> BuildConfig:
    from tests.helpers.sources import write_chain_source
    src = write_chain_source(tmp_path_factory.mktemp("src") / "dapo.jsonl")
    return BuildConfig(domain="number", model="smollm2-135m", source=str(src), problems=6, oversample=12, seed=3,
                       min_novel_numbers=0, sampling=SamplingConfig(max_tokens=60), engine="scripted",
                       **paper.PRESET)


@pytest.fixture(scope="module")
def paper_build(tmp_path_factory, paper_cfg):
    root = tmp_path_factory.mktemp("root")
    eng = Recording()
    bdir = build(paper_cfg, root, engine=eng, console=Console(quiet=True))
    return root, bdir, eng


@pytest.fixture(scope="module")
def scored(paper_build):
    root, bdir, _ = paper_build
    for proto in ("held-out", "in-group"):
        for name in ("grpo", "mcs-2"):
            evaluate(bdir, name, {}, proto, console=Console(quiet=True))
    return root, bdir


def _rows(bdir, table, sch):
    return store.read_table(bdir / table, sch).to_pylist()


def test_sveb_builds_keep_their_fingerprints():
    # a config without the new field fingerprints as SVEB's own (since the seeds' partition, issue 56: every build's
    # problems fingerprint names the draw rule, so the committed builds' are older). The dtype is pinned: "auto"
    # resolves from the CPU (bf16 on avx512_bf16 machines), and the dtype is part of the rollouts' fingerprint.
    fp32 = BuildConfig(dtype="float32")
    assert stage_fps(fp32) == {"problems": "d347649cce7e", "rollouts": "fe75415afe5c",
                               "states": "2ae90cba020c", "references": "86529c69630f"}
    assert stage_fps(BuildConfig(dtype="float32", protocol="paper"))["rollouts"] != "fe75415afe5c"
    bf16 = stage_fps(BuildConfig(dtype="bfloat16"))
    assert bf16["problems"] == "d347649cce7e" and bf16["rollouts"] != "fe75415afe5c"


def test_space_cut_is_uniform_over_spaces_and_the_end_without_one():
    assert paper.space_cut("no-space-here", random.Random(0)) == len("no-space-here")
    text = "a bb ccc d"
    seen = {paper.space_cut(text, random.Random(i)) for i in range(200)}
    assert seen == {i for i, c in enumerate(text) if c == " "}


def test_one_state_per_problem_cut_before_a_space_of_the_first_rollout(paper_build, paper_cfg):
    _, bdir, _ = paper_build
    states = _rows(bdir, "states", schema.STATES)
    rolls = {(r["problem_id"], r["rollout_idx"]): r for r in _rows(bdir, "rollouts", schema.ROLLOUTS)}
    problems = _rows(bdir, "problems", schema.PROBLEMS)
    # the source's path seeds the draws (it is in the config), so how many tiers fill varies with the temp dir
    assert len(states) == len(problems) >= paper_cfg.problems - 2
    assert len({s["problem_id"] for s in states}) == len(states)
    tok = CharTokenizer()
    for s in states:
        assert s["rollout_idx"] == 0  # the group's first rollout
        r = rolls[(s["problem_id"], 0)]
        text, cut = r["response_text"], len(s["prefix_text"])
        assert text[:cut] == s["prefix_text"]
        # the cut is at a space: the prefix is the text before it, the continuation's first character is that space
        assert cut < len(text) and text[cut] == " "
        assert tok.decode(r["response_token_ids"][: s["t"]]) == s["prefix_text"] and s["T"] == len(text)
    # seeded: the same config cuts the same states
    assert paper_cfg.seed == 3


def test_continuations_get_the_full_budget_on_the_retokenised_prefix(paper_build, paper_cfg):
    _, bdir, eng = paper_build
    from sveb.data_builders import domain_module
    problems = {p["problem_id"]: p for p in _rows(bdir, "problems", schema.PROBLEMS)}
    states = _rows(bdir, "states", schema.STATES)
    reqs = eng.requests["references"]
    n = paper_cfg.mc + paper_cfg.mc_extra
    assert len(reqs) == n * len(states)
    tok = CharTokenizer()
    for i, s in enumerate(states):
        msgs = domain_module("number").prompt(problems[s["problem_id"]])
        want = tuple(tok.encode(tok.render_chat(msgs) + s["prefix_text"]))
        for r in reqs[i * n:(i + 1) * n]:
            assert r.max_tokens == paper_cfg.sampling.max_tokens  # not max_tokens - t
            assert r.prompt_token_ids == want
    refs = _rows(bdir, "references", schema.REFERENCES)
    assert all(len(r["mc_rewards"]) == 20 and len(r["extra_rewards"]) == 4 for r in refs)


def test_sveb_continuations_still_get_the_budget_left(tmp_path, paper_cfg):
    cfg = replace(paper_cfg, protocol="sveb", states_per_problem=2, min_acc=0.1, max_acc=0.9, screen=8, problems=2)
    eng = Recording()
    bdir = build(cfg, tmp_path / "root", engine=eng, console=Console(quiet=True))
    states = _rows(bdir, "states", schema.STATES)
    n = cfg.mc + cfg.mc_extra
    for i, s in enumerate(states):
        assert {r.max_tokens for r in eng.requests["references"][i * n:(i + 1) * n]} == {60 - s["t"]}


def test_equal_problems_per_screening_tier(paper_build, paper_cfg):
    _, bdir, _ = paper_build
    m = store.read_manifest(bdir)
    acc = m["candidate_accuracy"]
    kept = [p["problem_id"] for p in _rows(bdir, "problems", schema.PROBLEMS)]
    tiers = [paper.tier_of(acc[pid]) for pid in kept]
    assert None not in tiers
    # each tier holds its quota, or every screened candidate of that tier when the candidates ran out first
    screened = [paper.tier_of(a) for a in acc.values()]
    quota = paper.quotas(paper_cfg.problems)
    assert quota == [2, 2, 2]
    assert [tiers.count(i) for i in range(3)] == [min(quota[i], screened.count(i)) for i in range(3)]
    if len(kept) < paper_cfg.problems:  # short: every candidate was screened
        assert len(acc) == m["n_candidates"]
    screens = _rows(bdir, "screens", schema.ROLLOUTS)
    assert {len([r for r in screens if r["problem_id"] == pid]) for pid in kept} == {20}  # 20 separate samples
    assert not {(r["problem_id"], r["seed"]) for r in screens} & {
        (r["problem_id"], r["seed"]) for r in _rows(bdir, "rollouts", schema.ROLLOUTS)}
    assert paper.quotas(7) == [3, 2, 2]
    assert [paper.tier_of(x) for x in (0.05, 0.1, 0.15, 0.2, 0.35, 0.4, 0.75, 0.8)] == [None, 0, 0, 1, 1, 2, 2, None]


def test_number_rule_counts_integers_across_correct_screens_before_boxed():
    p = {"question": "What is 3 + 4?", "answer": "7"}
    texts = ["1 2 then 10 \\boxed{7} 99", "5 and 3", "11 12 13 14"]
    assert paper.novel_integers(p, texts, [1, 1, 0]) == {1, 2, 10, 5}  # 99 after \boxed, 3 in the question
    assert paper.passes(None, p, texts, [1.0, 1.0, 0.0], 4) == (True, 2 / 3)  # 0.67: a tier; 4 integers
    assert paper.passes(None, p, texts, [1.0, 0.0, 0.0], 4)[0] is False  # one correct: {1, 2, 10}
    assert paper.passes(None, p, texts, [1.0, 1.0, 0.0], 5)[0] is False
    assert paper.passes(None, p, texts, [1.0, 1.0, 1.0], 4)[0] is False  # accuracy 1: no tier


def _brute(rewards, k):
    r = np.asarray(rewards, float)
    means = [r[list(c)].mean() for c in itertools.combinations(range(len(r)), k)]
    return float(np.mean(np.abs(np.array(means) - r.mean()))), float(np.mean((np.array(means) - r.mean()) ** 2))


@pytest.mark.parametrize("rewards", [[1, 0, 0, 1, 1, 0, 1], [0, 0, 0, 0, 0, 1], [1] * 6, [0.5, 0.2, 1, 0, 0.75]])
def test_subset_errors_are_the_exact_expectation_over_subsets(rewards):
    for k in range(1, len(rewards) + 1):
        assert paper_rows.subset_errors(rewards, k) == pytest.approx(_brute(rewards, k), abs=1e-12)


def test_authors_mcs_rows_score_the_exact_expectation_labelled_apart(scored):
    root, bdir = scored
    rows = leaderboard.rows(root)
    assert {r["build_protocol"] for r in rows} == {"paper"}
    refs = {r["state_id"]: r["mc_rewards"] for r in _rows(bdir, "references", schema.REFERENCES)}
    for k in (1, 2, 3, 4):
        mine = [r for r in rows if r["estimator"] == f"mcs-{k}-ref"]
        assert {r["protocol"] for r in mine} == {"held-out", "in-group"}
        want = np.mean([_brute(d, k)[0] for d in refs.values()])  # brute force over all C(20, k) subsets
        assert mine[0]["mae"] == pytest.approx(want, abs=1e-12) and mine[0]["bias"] == 0.0
    names = [r["estimator"] for r in rows if r["protocol"] == "held-out"]
    assert "mcs-2" in names and names.index("mcs-2") < names.index("mcs-1-ref")  # SVEB's rows, then the authors'
    from io import StringIO
    buf = StringIO()
    leaderboard.print_pivot(rows, Console(file=buf, width=200))
    assert "paper's build protocol" in buf.getvalue() and "mcs-3-ref" in buf.getvalue()


def test_protocol_in_the_manifest(paper_build, scripted_build):
    assert store.read_manifest(paper_build[1])["config"]["protocol"] == "paper"
    assert store.read_manifest(scripted_build[1])["config"]["protocol"] == "sveb"
    assert protocol_of({"config": {"seed": 0}}) == "sveb"  # made before protocols were recorded


def test_two_protocols_never_pool(tmp_path):
    cfg = {"domain": "number", "rollouts": 32, "seed": 0}

    def made(name, **extra):
        d = tmp_path / name
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"model": "m", "domain": "number", "config": {**cfg, **extra}}))
        return d
    old, sveb1, paper0, paper1 = (made("old"), made("s1", seed=1, protocol="sveb"),
                                  made("p0", protocol="paper"), made("p1", seed=1, protocol="paper"))
    assert pool_key(old) == pool_key(sveb1)        # a build made before protocols were recorded is SVEB's
    assert pool_key(paper0) == pool_key(paper1)    # seeds of one protocol pool
    assert pool_key(paper0) != pool_key(old)       # two protocols never


def test_preset_rejects_several_states_per_problem(paper_cfg, tmp_path):
    with pytest.raises(BuildError, match="one state per problem"):
        build(replace(paper_cfg, states_per_problem=2), tmp_path, engine=ScriptedEngine())


def test_cli_preset_paper_sets_the_protocol_and_given_flags_win(monkeypatch, tmp_path):
    import sveb.sample.pipeline
    import sveb.store.builds
    from sveb.cli import app
    seen = []
    monkeypatch.setattr(sveb.sample.pipeline, "build", lambda cfg, root, **kw: seen.append(cfg) or tmp_path)
    monkeypatch.setattr(sveb.store.builds, "describe", lambda bdir: "")
    r = CliRunner().invoke(app, ["build", "--preset", "paper", "--rollouts", "8", "--root", str(tmp_path)])
    assert r.exit_code == 0, r.output
    cfg = seen[0]
    assert (cfg.protocol, cfg.rollouts, cfg.states_per_problem, cfg.mc, cfg.screen, cfg.sampling.max_tokens,
            cfg.sampling.temperature) == ("paper", 8, 1, 20, 20, paper.MAX_TOKENS, 0.7)
    r = CliRunner().invoke(app, ["build", "--preset", "paper", "--max-tokens", "300", "--root", str(tmp_path)])
    assert r.exit_code == 0 and seen[1].rollouts == 32 and seen[1].sampling.max_tokens == 300
    r = CliRunner().invoke(app, ["build", "--preset", "nope", "--root", str(tmp_path)])
    assert r.exit_code != 0 and "unknown preset" in r.output


def test_report_shows_the_protocol_and_the_authors_rows(scored, tmp_path):
    from sveb.present.report import write_report
    root, _ = scored
    write_report(root, tmp_path / "report")
    md = (tmp_path / "report" / "table.md").read_text()
    assert "[paper protocol]" in md and "mcs-2-ref" in md
    with open(tmp_path / "report" / "leaderboard.csv") as f:
        assert "build_protocol" in f.readline()


def test_table4_preset_paper(tmp_path):
    import importlib.util

    from tests.helpers.sources import write_chain_source
    spec = importlib.util.spec_from_file_location("table4_paper",
                                                  Path(__file__).parents[1] / "benchmarks" / "table4.py")
    table4 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table4)
    a = table4.parse(["--preset", "paper"])
    test, train = table4.configs("number", a, "builtin")
    assert (test.protocol, test.rollouts, test.states_per_problem, test.step_pairs, test.screen,
            train.states_per_problem,
            a.out) == ("paper", 32, 1, False, 20, 1, "results/table4-paper")
    assert table4.configs("number", table4.parse([]), "builtin")[0].protocol == "sveb"
    src = write_chain_source(tmp_path / "dapo.jsonl")
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    out = table4.main(["--preset", "paper", "--domains", "number", "--source", f"number={src}", "--estimators",
                       "grpo,mcs-2", "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"),
                       "--out", str(tmp_path / "out"), "--problems", "3", "--oversample", "12", "--max-tokens", "60",
                       "--min-novel-numbers", "0", "--no-train"],
                      engine=ScriptedEngine(), model_dir=weights)
    assert "| mcs-2 |" in (out / "table4.md").read_text()
    assert store.read_manifest(tmp_path / "exports" / "number")["config"]["protocol"] == "paper"


def test_authors_rows_pool_over_seeds_and_never_across_protocols(paper_cfg, tmp_path):
    root = tmp_path / "root"
    cfgs = [replace(paper_cfg, seed=s, problems=3) for s in (0, 1)]
    cfgs.append(replace(cfgs[0], protocol="sveb"))  # same config but the protocol: never in the pool
    bdirs = [build(c, root, engine=ScriptedEngine(), console=Console(quiet=True)) for c in cfgs]
    for b in bdirs:
        evaluate(b, "grpo", {}, "held-out", console=Console(quiet=True))
    rows = leaderboard.rows(root)
    pooled = [r for r in rows if r["kind"] == "pooled"]
    assert {r["build_protocol"] for r in pooled} == {"paper"} and {r["n_builds"] for r in pooled} == {2}
    draws = [r["mc_rewards"] for b in bdirs[:2] for r in _rows(b, "references", schema.REFERENCES)]
    ref2 = next(r for r in pooled if r["estimator"] == "mcs-2-ref")
    assert ref2["n_states"] == len(draws) >= 4  # tiers fill as far as each seed's (disjoint) candidates allow
    assert ref2["mae"] == pytest.approx(np.mean([_brute(d, 2)[0] for d in draws]), abs=1e-12)
    alone = [r for r in rows if r["kind"] == "build"]
    assert {r["build_protocol"] for r in alone} == {"sveb"}
    assert not any(paper_rows.is_ref_row(r["estimator"]) for r in alone)


def test_demo_preset_paper_is_the_papers_protocol():
    from sveb.experiment.demo import BASE, PRESETS
    from sveb.sample.rules import validate
    size, train = PRESETS["paper"]
    for extra in ({}, {"split": "train", **train}):
        cfg = BuildConfig(domain="number", engine="vllm", **{**BASE, **size, **extra})
        validate(cfg)
        paper.validate(cfg)
        assert (cfg.protocol, cfg.rollouts, cfg.states_per_problem, cfg.screen) == ("paper", 32, 1, 20)
    assert paper.quotas(size["problems"]) == [4, 4, 4]


def test_paper_protocol_with_the_filter_opened_keeps_candidates_in_order(paper_cfg, tmp_path):
    cfg = replace(paper_cfg, min_acc=0.0, max_acc=1.0, problems=3)  # flags given win over the preset's tiers
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine(), console=Console(quiet=True))
    assert len(_rows(bdir, "states", schema.STATES)) == 3 and not list((bdir / "screens").glob("*.parquet"))


def test_shortfall_names_each_tier_that_ran_short():
    assert paper.shortfall(6, [0.1, 0.15, 0.2, 0.3, 0.5, 0.6]) == ""  # every tier at its quota
    # 200 problems: quotas 67, 67, 66; the top tier kept 61
    accs = [0.1] * 67 + [0.3] * 67 + [0.5] * 61
    assert paper.shortfall(200, accs) == "the paper's tiers ran short ((0.37, 0.77] 61 of 66)"
    assert paper.shortfall(7, [0.1, 0.5]) == ("the paper's tiers ran short ((0.07, 0.17] 1 of 3; "
                                              "(0.17, 0.37] 0 of 2; (0.37, 0.77] 1 of 2)")


def test_a_short_paper_build_says_which_tier_ran_short(paper_cfg, tmp_path):
    cfg = replace(paper_cfg, problems=60, oversample=1)  # 60 candidates cannot fill 20 a tier
    con = Console(record=True, width=400)
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine(), console=con)
    out = con.export_text()
    m = store.read_manifest(bdir)
    kept = [m["candidate_accuracy"][p["problem_id"]] for p in _rows(bdir, "problems", schema.PROBLEMS)]
    assert len(kept) < 60 and f"only {len(kept)} of 60 problems kept: " in out
    assert paper.shortfall(60, kept) in out and "ran short (" in out and "difficulty filter" not in out


class _ByteTokenizer:
    """Byte-level ids, decoded as byte-level BPE tokenizers do: a character cut inside its bytes shows as U+FFFD."""

    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


@pytest.mark.parametrize("text", ["数 学", "é é é", "x 数学 y", "a×b = c ÷ d", "plain ascii text", "−3 − 4"])
def test_token_cut_is_the_most_tokens_inside_the_prefix_with_multibyte_characters(text):
    tok, ids = _ByteTokenizer(), list(text.encode())
    for pos in [i for i, c in enumerate(text) if c == " "] + [len(text)]:
        truth = max(t for t in range(len(ids) + 1) if text[:pos].startswith(tok.decode(ids[:t])))
        t = paper.token_cut(tok, ids, text, pos)
        assert t == truth and tok.decode(ids[:t]) == text[:pos]  # byte tokens: the prefix exactly


def test_number_rule_reads_like_the_authors_script():
    # their select_samples.py: responses split at "\box", \d+ runs as int (any Unicode digit), a text whose run
    # int() refuses gives no number at all; the solution's numbers excluded too
    p = {"question": "What is 3 + 4?", "answer": "7", "meta": '{"solution": "3 + 4 = 7, so 21 / 3"}'}
    assert paper.novel_integers(p, ["1 2 \\box{10} 11"], [1]) == {1, 2}
    assert paper.novel_integers(p, ["5 21 ٣ ٥"], [1]) == {5}  # 21 in the solution; Arabic-Indic 3 and 5 are 3, 5
    assert paper.novel_integers(p, ["1" * 5000 + " 8 9"], [1]) == set()
    assert paper.novel_integers({"question": "q", "answer": "1", "meta": "not json"}, ["2 1"], [1]) == {2}
    assert paper.passes(None, p, [], [], 4) == (False, None)  # no screens: skipped, as theirs are


def test_programming_screens_four_equal_tiers_from_above_0():
    tiers = paper.tiers_for("programming")
    assert tiers == ((0.0, 0.07),) + paper.TIERS and paper.tiers_for("number") == paper.TIERS
    assert [paper.tier_of(x, tiers) for x in (0.0, 0.05, 0.07, 0.1, 0.35, 0.75, 0.8)] == [None, 0, 0, 1, 2, 3, None]
    assert paper.quotas(200, len(tiers)) == [50, 50, 50, 50]
    assert paper.passes(BuildConfig(domain="programming"), {}, ["x"] * 20, [1.0] + [0.0] * 19, 0) == (True, 0.05)
    assert paper.passes(BuildConfig(domain="number"), {}, ["x"] * 20, [1.0] + [0.0] * 19, 0) == (False, 0.05)
    assert paper.preset_for("programming")["min_acc"] == 0.0 and paper.preset_for("number")["min_acc"] == 0.07
    assert paper.shortfall(8, [0.05, 0.1, 0.2, 0.5], tiers) == ("the paper's tiers ran short ((0, 0.07] 1 of 2; "
                                                                "(0.07, 0.17] 1 of 2; (0.17, 0.37] 1 of 2; "
                                                                "(0.37, 0.77] 1 of 2)")


def test_cli_preset_paper_takes_the_domains_tiers(monkeypatch, tmp_path):
    from sveb.cli import preset_config

    class Ctx:
        def get_parameter_source(self, name):
            return None
    cfg = preset_config(BuildConfig(domain="programming"), "paper", Ctx())
    assert (cfg.min_acc, cfg.max_acc, cfg.protocol) == (0.0, 0.77, "paper")
    assert preset_config(BuildConfig(domain="number"), "paper", Ctx()).min_acc == 0.07
