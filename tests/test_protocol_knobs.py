"""The paper protocol's choices as separate build knobs (cut, continuation, tiers; G is --rollouts), each alone on the
scripted engine, and the fingerprints of every build made before the knobs."""

import json
from dataclasses import asdict, replace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, SamplingConfig, protocol_of
from sveb.core.errors import BuildError
from sveb.engines.scripted import CharTokenizer
from sveb.sample import paper
from sveb.sample.pipeline import build
from sveb.sample.rules import stage_fps
from sveb.store.builds import pool_key
from tests.helpers.engines import Recording

F32 = dict(dtype="float32")  # a concrete dtype: the fingerprints do not depend on this machine's
POWERED = dict(problems=50, rollouts=16, states_per_problem=4, step_pairs=True, oversample=3,
               sampling=SamplingConfig(max_tokens=256))
# Stage fingerprints computed by the code before the knobs existed (commit 98674a8): they must never change.
# A space cut's states changed on purpose in the 13th session (the byte-safe token cut, marked "token cut 2" on
# the states fingerprint, sveb/sample/rules.py: rule_marks), as did programming's paper tiers: those pins moved.
# Every pin moved on purpose with issue 56: seeds became a stratified partition of the source, so every build's
# candidates changed and the problems fingerprint names the draw rule (sveb.data_builders.seeds.DRAW).
BEFORE = {
    "default": (BuildConfig(**F32), "d347649cce7e fe75415afe5c 2ae90cba020c 86529c69630f"),
    "paper bare": (BuildConfig(protocol="paper", **F32), "d347649cce7e 55042d9e0b67 fba7b87930fd a7e612a142a0"),
    "paper preset": (BuildConfig(sampling=SamplingConfig(max_tokens=4096), **F32, **paper.PRESET),
                     "d347649cce7e 2903cc76c653 29816a5a27e6 42dba9b0b248"),
    "paper 256": (BuildConfig(sampling=SamplingConfig(max_tokens=256), **F32, **paper.PRESET),
                  "d347649cce7e 31096066c266 148b5c79aba8 c67055617aa6"),
    "powered": (BuildConfig(**F32, **POWERED), "971294432663 ac571db75582 55542b3e0f7f a451cf8c6f71"),
    "programming": (BuildConfig(domain="programming", **F32, **POWERED),
                    "3dea0fd5c547 2bd53f60446d 7b73114a6935 ff7cadf3b102"),
    "paper programming": (BuildConfig(domain="programming", oversample=4, sampling=SamplingConfig(max_tokens=256),
                                      **F32, **{**paper.PRESET, "problems": 12}),
                          # changed on purpose (13th session): programming's paper tiers gained (0, 0.07]
                          "2b21cadb0dbb 063adf07e9c0 24d81c4b8fed 807f3021ce34"),
    "paper, filter open": (BuildConfig(**F32, **{**paper.PRESET, "min_acc": 0.0, "max_acc": 1.0}),
                           "d347649cce7e 2734985771ad 82cc1b8d11c9 b515eec9936b"),
    "hub, seed 1, hf, bf16": (BuildConfig(dtype="bfloat16", seed=1, engine="hf", min_novel_numbers=4, source="hub"),
                              "d77ee45868ed 510520d78886 cdce620c3af6 4cf0168e3205"),
}
STAGES = ("problems", "rollouts", "states", "references")


def _fps(cfg) -> str:
    return " ".join(stage_fps(cfg)[s] for s in STAGES)


@pytest.mark.parametrize("name", list(BEFORE))
def test_builds_made_before_the_knobs_keep_their_fingerprints(name):
    cfg, want = BEFORE[name]
    assert _fps(cfg) == want
    # spelled with every knob explicit, a build of one protocol is the same build
    theirs = cfg.protocol == "paper"
    explicit = replace(cfg, **{k: v[theirs] for k, v in paper.CHOICES.items()})
    assert _fps(explicit) == want and explicit == cfg


def test_each_knob_alone_marks_only_the_stages_it_changes():
    sveb = stage_fps(BuildConfig(**F32))
    cut = stage_fps(BuildConfig(cut="space", states_per_problem=1, **F32))
    one = stage_fps(BuildConfig(states_per_problem=1, **F32))
    cont = stage_fps(BuildConfig(continuation="full", **F32))
    tiers = stage_fps(BuildConfig(tiers="paper", **F32))
    for fps in (cut, cont, tiers):  # SVEB's candidates and seeds: the draws the builds share
        assert fps["problems"] == sveb["problems"] and fps["rollouts"] == sveb["rollouts"]
    assert cut["states"] != one["states"] and tiers["states"] != sveb["states"]
    assert cont["states"] == sveb["states"] and cont["references"] != sveb["references"]
    combos = {_fps(BuildConfig(cut="space", continuation=c, tiers=t, states_per_problem=1, **F32))
              for c in ("remaining", "full") for t in ("range", "paper")}
    assert len(combos) == 4 and _fps(BuildConfig(protocol="paper", states_per_problem=1, **F32)) in combos


def test_one_spelling_per_protocol():
    c = BuildConfig(protocol="paper", cut="token")  # the paper's preset with SVEB's cut: SVEB's plus two of theirs
    assert (c.protocol, c.cut, c.continuation, c.tiers) == ("sveb", "", "full", "paper")
    assert [c.choice(k) for k in paper.CHOICES] == ["token", "full", "paper"]
    p = BuildConfig(cut="space", continuation="full", tiers="paper")
    assert p == BuildConfig(protocol="paper") and (p.protocol, p.cut) == ("paper", "")
    assert BuildConfig(protocol="paper", cut="token", continuation="remaining", tiers="range") == BuildConfig()
    assert replace(BuildConfig(protocol="paper"), protocol="sveb") == BuildConfig()


def test_old_manifests_read_with_their_protocols_choices(tmp_path):
    old_paper = {"model": "m", "domain": "number", "config": {"protocol": "paper", "rollouts": 32, "seed": 0}}
    cfg = BuildConfig.from_manifest(old_paper)
    assert [cfg.choice(k) for k in paper.CHOICES] == ["space", "full", "paper"]
    assert BuildConfig.from_manifest({"config": {"seed": 0}}).choice("cut") == "token"
    new_paper = {**old_paper, "config": asdict(BuildConfig(model="m", protocol="paper", rollouts=32, seed=1))}
    one = {**old_paper, "config": asdict(BuildConfig(model="m", cut="space", states_per_problem=1, rollouts=32))}
    dirs = []
    for i, m in enumerate((old_paper, new_paper, one)):
        d = tmp_path / str(i)
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps(m))
        dirs.append(d)
    assert pool_key(dirs[0]) == pool_key(dirs[1]) != pool_key(dirs[2])  # seeds pool; a single choice never
    assert protocol_of(one) == "sveb+cut=space" and protocol_of(old_paper) == "paper"


@pytest.mark.parametrize("change, match", [
    (dict(cut="space"), "--states-per-problem 2: --cut space cuts one state per problem"),
    (dict(cut="space", states_per_problem=1, step_pairs=True), "--states-per-problem 1: --cut space .* --step-pairs"),
    (dict(cut="spaces"), "--cut spaces: must be token or space"),
    (dict(continuation="all"), "--continuation all: must be remaining or full"),
    (dict(tiers="equal"), "--tiers equal: must be range or paper"),
    (dict(tiers="paper", screen=0), "--screen 0: --tiers paper screens"),
    (dict(protocol="paper", states_per_problem=2), "the paper's protocol cuts one state per problem"),
])
def test_invalid_combinations_are_one_line_errors_naming_the_flag(change, match):
    with pytest.raises(BuildError, match=match) as e:
        paper.validate(BuildConfig(**change))
    assert "\n" not in str(e.value)


@pytest.fixture(scope="module")
def knob_builds(tmp_path_factory):
    """SVEB's build and one build per knob alone, from the same candidates and seeds, with their requests."""
    from tests.helpers.sources import write_chain_source
    tmp = tmp_path_factory.mktemp("knobs")
    src = write_chain_source(tmp / "dapo.jsonl")
    base = BuildConfig(domain="number", source=str(src), problems=3, oversample=12, rollouts=8, states_per_problem=2,
                       mc=6, mc_extra=2, min_acc=0.1, max_acc=0.9, min_novel_numbers=0, seed=0, engine="scripted",
                       sampling=SamplingConfig(max_tokens=60), **F32)
    cfgs = {"sveb": base, "cut": replace(base, cut="space", states_per_problem=1),
            "continuation": replace(base, continuation="full"),
            "tiers": replace(base, tiers="paper", screen=20, min_acc=0.07, max_acc=0.77)}
    out = {}
    for name, cfg in cfgs.items():
        eng = Recording()
        out[name] = (cfg, build(cfg, tmp / "root", engine=eng, console=Console(quiet=True)), eng)
    return out


def _rows(bdir, table, sch):
    return store.read_table(bdir / table, sch).to_pylist()


def test_space_cut_alone_cuts_before_a_space_of_the_first_rollout(knob_builds):
    cfg, bdir, eng = knob_builds["cut"]
    _, sbdir, _ = knob_builds["sveb"]
    rolls = {(r["problem_id"], r["rollout_idx"]): r for r in _rows(bdir, "rollouts", schema.ROLLOUTS)}
    same = {(r["problem_id"], r["rollout_idx"]): r["response_text"] for r in _rows(sbdir, "rollouts", schema.ROLLOUTS)}
    assert {k: r["response_text"] for k, r in rolls.items() if k in same} == {k: v for k, v in same.items()
                                                                                if k in rolls}  # SVEB's draws
    states = _rows(bdir, "states", schema.STATES)
    problems = {p["problem_id"]: p for p in _rows(bdir, "problems", schema.PROBLEMS)}
    assert len(states) == len(problems) >= 2 and all(s["rollout_idx"] == 0 for s in states)
    from sveb.data_builders import domain_module
    tok, n = CharTokenizer(), cfg.mc + cfg.mc_extra
    for i, s in enumerate(states):
        text, cut = rolls[(s["problem_id"], 0)]["response_text"], len(s["prefix_text"])
        assert text[:cut] == s["prefix_text"] and text[cut] == " "  # the prefix ends where a space begins
        msgs = domain_module("number").prompt(problems[s["problem_id"]])
        for r in eng.requests["references"][i * n:(i + 1) * n]:  # the prefix text re-tokenised into the prompt
            assert r.prompt_token_ids == tuple(tok.encode(tok.render_chat(msgs) + s["prefix_text"]))
            assert r.max_tokens == cfg.sampling.max_tokens - s["t"]  # SVEB's budget: the continuation is not switched


def test_full_continuation_alone_keeps_svebs_states_and_gives_the_full_budget(knob_builds):
    cfg, bdir, eng = knob_builds["continuation"]
    _, sbdir, seng = knob_builds["sveb"]
    states = _rows(bdir, "states", schema.STATES)
    assert states == _rows(sbdir, "states", schema.STATES)
    n = cfg.mc + cfg.mc_extra
    for i, s in enumerate(states):
        mine, svebs = (e.requests["references"][i * n:(i + 1) * n] for e in (eng, seng))
        assert {r.max_tokens for r in mine} == {cfg.sampling.max_tokens}
        assert {r.max_tokens for r in svebs} == {cfg.sampling.max_tokens - s["t"]}
        assert [r.prompt_token_ids for r in mine] == [r.prompt_token_ids for r in svebs]  # token-exact prefix


def test_paper_tiers_alone_keep_equal_problems_per_tier(knob_builds):
    cfg, bdir, _ = knob_builds["tiers"]
    acc = store.read_manifest(bdir)["candidate_accuracy"]
    kept = [p["problem_id"] for p in _rows(bdir, "problems", schema.PROBLEMS)]
    tiers = [paper.tier_of(acc[pid]) for pid in kept]
    screened = [paper.tier_of(a) for a in acc.values()]
    quota = paper.quotas(cfg.problems)
    assert None not in tiers and [tiers.count(i) for i in range(3)] == [min(q, screened.count(i))
                                                                        for i, q in enumerate(quota)]
    screens = _rows(bdir, "screens", schema.ROLLOUTS)
    assert {len([r for r in screens if r["problem_id"] == pid]) for pid in kept} == {20}
    states = _rows(bdir, "states", schema.STATES)
    assert len(states) == 2 * len(kept)  # SVEB's cut: token-exact, two per problem
    tok = CharTokenizer()
    rolls = {(r["problem_id"], r["rollout_idx"]): r for r in _rows(bdir, "rollouts", schema.ROLLOUTS)}
    assert all(tok.decode(rolls[(s["problem_id"], s["rollout_idx"])]["response_token_ids"][:s["t"]])
               == s["prefix_text"] for s in states)


def test_cli_knobs_depart_from_the_preset_alone(monkeypatch, tmp_path):
    import sveb.sample.pipeline
    import sveb.store.builds
    from sveb.cli import app
    seen = []
    monkeypatch.setattr(sveb.sample.pipeline, "build", lambda cfg, root, **kw: seen.append(cfg) or tmp_path)
    monkeypatch.setattr(sveb.store.builds, "describe", lambda bdir: "")
    r = CliRunner().invoke(app, ["build", "--cut", "space", "--states-per-problem", "1", "--root", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (seen[0].protocol, seen[0].choice("cut"), seen[0].choice("continuation")) == ("sveb", "space", "remaining")
    r = CliRunner().invoke(app, ["build", "--preset", "paper", "--continuation", "remaining", "--root", str(tmp_path)])
    assert r.exit_code == 0, r.output
    c = seen[1]
    assert (c.protocol, c.rollouts) == ("sveb", 32)
    assert [c.choice(k) for k in paper.CHOICES] == ["space", "remaining", "paper"]
    r = CliRunner().invoke(app, ["build", "--preset", "paper", "--root", str(tmp_path)])
    assert seen[2].protocol == "paper" and seen[2] == replace(seen[2], cut="space", continuation="full", tiers="paper")
    r = CliRunner().invoke(app, ["build", "--cut", "space", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "--states-per-problem 2: --cut space" in r.output and len(seen) == 3
