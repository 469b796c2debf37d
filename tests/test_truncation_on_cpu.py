"""Why reference continuations are cut off by the token budget more often than rollouts (14.9% vs 8.2%
on a real build), with a policy whose truth is known: the scripted engine with loops on (after each flip it
loops forever with probability Q, so the budget cuts it off).

A state is a rollout chosen uniformly and t uniform in [1, T-1], T the rollout's own length: t depends on the
rollout's future, so it is not a stopping time. With M(s) = P(cut off | prefix s), what a state's references
estimate, optional stopping gives E[M] = P(a rollout is cut off) for a stopping-time cut, but not for this one:
a looping rollout is long, so most of its cuts lie inside its loop (M = 1) while short ones keep their cuts
where the loop is still possible (M > 0). The excess is the selection alone: the references stay unbiased for
their prefixes (fresh draws of exactly M and V), and weighting each state by T - 1 undoes the selection.
"""

import functools
import json
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from sveb import store
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.engines.scripted import LOOP, STEPS, ScriptedEngine, after_flip, flip_probability, gold_of, render
from sveb.sample import cuts, pipeline

N, Q, B = 8, 0.03, 300   # flips, loop probability after each flip, --max-tokens
T_STOP = 30              # the stopping-time cut: t uniform in [1, 30], below every rollout's length (>= 47)
R = 1 - (1 - Q) ** N     # P(a rollout is cut off): it loops after one of its N flips


# ---- exact values, from the policy's definition alone -------------------------------------------------------
def pending(t: int) -> int:
    """Loop decisions still to come after the first t response characters."""
    return sum(after_flip(k) >= t for k in range(1, N + 1))


def cut_risk(prefix: str) -> float:
    """M(prefix): the probability that a continuation of this response prefix is cut off by the budget."""
    return 1.0 if LOOP in prefix else 1 - (1 - Q) ** pending(len(prefix))


def value(prefix: str, p: float) -> float:
    """V(prefix): no loop from here on, and at least half of the N flips are 1."""
    if LOOP in prefix:
        return 0.0
    body = prefix[len(STEPS):].split(".")[0] if prefix.startswith(STEPS) else ""
    done = [int(c) for c in body if c in "01"]
    need = (N + 1) // 2 - sum(done)
    return (1 - Q) ** pending(len(prefix)) * float(binom.sf(need - 1, N - len(done), p))


def outcomes(p: float, gold: int):
    """(probability, T, loop start or None) of every kind of rollout: looping after flip k, or answering."""
    for k in range(1, N + 1):
        yield Q * (1 - Q) ** (k - 1), B, after_flip(k)
    win = float(binom.sf((N + 1) // 2 - 1, N, p))
    for w, flips in ((win, [1] * N), (1 - win, [0] * N)):
        yield (1 - Q) ** N * w, len(render(flips, gold, N)), None


def risk_at(t: int, start: int | None) -> float:
    return 1.0 if start is not None and t > start else 1 - (1 - Q) ** pending(t)


@functools.cache
def predicted(p: float, gold: int) -> dict[str, float]:
    """Expected shares cut off: rollouts; references under SVEB's cut (t uniform in [1, T-1]) and under a
    stopping-time cut (t uniform in [1, T_STOP], independent of the rollout); and E[(T-1)(M - cut)]."""
    out = {"rollouts": R, "uniform": 0.0, "stopping": 0.0, "weighted": 0.0}
    for prob, T, start in outcomes(p, gold):
        risks = [risk_at(t, start) for t in range(1, T)]
        out["uniform"] += prob * np.mean(risks)
        out["stopping"] += prob * np.mean(risks[:T_STOP])
        out["weighted"] += prob * (np.sum(risks) - (T - 1) * (start is not None))
    return out


def test_the_predictions():
    for p, gold in ((0.2, 9), (0.5, 14), (0.8, 3)):
        pr = predicted(p, gold)
        assert pr["stopping"] == pytest.approx(pr["rollouts"], abs=1e-12)  # optional stopping
        assert pr["weighted"] == pytest.approx(0, abs=1e-9)                 # T - 1 undoes the selection
        assert pr["uniform"] > pr["rollouts"] + 0.03                        # 0.26 vs 0.22


# ---- the scripted loop ---------------------------------------------------------------------------------------
def test_loops_are_off_by_default_and_keep_the_flips():
    plain, looping = ScriptedEngine(), ScriptedEngine(loop_probability=0.1)
    prompt = "<|user|>What is 4 + 5?\n" + "<|assistant|>"
    assert plain._complete(prompt, 7, B) == ScriptedEngine(loop_probability=0.0)._complete(prompt, 7, B)
    loops = [looping._complete(prompt, s, B) for s in range(40)]
    assert any(LOOP in x for x in loops) and not all(LOOP in x for x in loops)
    for s, x in enumerate(loops):
        same = plain._complete(prompt, s, B)
        head = x.split(LOOP)[0]
        assert same.startswith(head) and (LOOP not in x or len(x) == B + 1)
    assert set(looping._complete(prompt + "steps: 1 0~~", 1, 5)) == {LOOP}    # a loop goes on


# ---- builds -----------------------------------------------------------------------------------------------
class Recording(ScriptedEngine):
    """Keeps every reference request with its completion."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.log = []

    def generate(self, requests, params, desc=""):
        outs = super().generate(requests, params, desc)
        if desc == "references":
            self.log += list(zip(requests, outs))
        return outs


def stopping_cuts(rng, usable, n):
    """t uniform in [1, T_STOP] drawn before the rollout, a rollout uniform among those longer than t."""
    seen = set()
    while len(seen) < n:
        t = rng.randint(1, T_STOP)
        r = rng.choice([u for u in usable if len(u["response_token_ids"]) > t])
        if (r["rollout_idx"], t) not in seen:
            seen.add((r["rollout_idx"], t))
            yield r, t


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trunc")
    src = tmp / "sums.jsonl"
    chdir = pytest.MonkeyPatch()
    chdir.chdir(tmp)  # a relative source name: the fingerprint (so every draw) is the same on every run
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b} + {c}?", "solution": str(a + b + c)})
                             for a in range(1, 9) for b in range(1, 9) for c in range(1, 13)))
    cfg = BuildConfig(domain="number", model="scripted", source=src.name, problems=180, oversample=1, rollouts=16,
                      # 768 sums: 2 seed slots
                      states_per_problem=5, mc=10, mc_extra=0, min_acc=0.0, max_acc=1.0, seed=1,
                      min_novel_numbers=0, sampling=SamplingConfig(max_tokens=B), engine="scripted")
    eng = Recording(loop_probability=Q)
    uniform = load(pipeline.build(cfg, tmp / "uniform", engine=eng))
    mp = pytest.MonkeyPatch()
    mp.setattr(cuts, "single_cuts", stopping_cuts)
    try:
        stop_cfg = replace(cfg, states_per_problem=20, mc=4)  # its excess is noisier: more states
        stopping = load(pipeline.build(stop_cfg, tmp / "stopping", engine=ScriptedEngine(loop_probability=Q)))
    finally:
        mp.undo()
        chdir.undo()
    return uniform, stopping, eng.log


def load(bdir) -> dict:
    """Per state: its problem, t, T, the share of its references cut off (c), M, V, its references' value, and
    whether its own rollout was cut off; with the build's manifest and rollouts."""
    problems = {p["problem_id"]: p for p in store.read_table(bdir / "problems").to_pylist()}
    rollouts = {(r["problem_id"], r["rollout_idx"]): r for r in store.read_table(bdir / "rollouts").to_pylist()}
    refs = {r["state_id"]: r for r in store.read_table(bdir / "references").to_pylist()}
    rows, raw = [], store.read_table(bdir / "states").to_pylist()
    for s in raw:
        ref, q = refs[s["state_id"]], problems[s["problem_id"]]["question"]
        p = flip_probability(q)
        rows.append({"pid": s["problem_id"], "t": s["t"], "T": s["T"], "ref": ref["value"],
                     "c": np.mean([f == "length" for f in ref["finish_reasons"][: ref["n_ref"]]]),
                     "M": cut_risk(s["prefix_text"]), "V": value(s["prefix_text"], p),
                     "cut": rollouts[(s["problem_id"], s["rollout_idx"])]["finish_reason"] == "length",
                     "pred": predicted(p, gold_of(q))})
    return {"manifest": store.read_manifest(bdir), "states": rows, "raw": raw, "rollouts": rollouts,
            "mc": store.read_manifest(bdir)["config"]["mc"]}


def mean_se(x, clusters) -> tuple[float, float]:
    """Mean and its problem-clustered standard error."""
    x, clusters = np.asarray(x, float), np.asarray(clusters)
    sums = [np.sum(x[clusters == g] - x.mean()) for g in np.unique(clusters)]
    return x.mean(), float(np.sqrt(np.sum(np.square(sums)))) / len(x)


def col(d, key):
    return np.array([s[key] for s in d["states"]], float)


def test_rollouts_are_cut_off_at_the_predicted_rate(builds):
    uniform, stopping, _ = builds
    rolls = [x["finish_reason"] == "length" for x in uniform["rollouts"].values()]
    assert uniform["manifest"]["truncated"]["rollouts"] == pytest.approx(np.mean(rolls), abs=1e-4)
    assert abs(np.mean(rolls) - R) < 4 * np.sqrt(R * (1 - R) / len(rolls))
    assert ([x["response_token_ids"] for x in uniform["rollouts"].values()]
            == [x["response_token_ids"] for x in stopping["rollouts"].values()])  # same rollouts in both builds


def test_references_are_cut_off_more_by_the_selection_alone(builds):
    uniform, stopping, _ = builds
    pids = [s["pid"] for s in uniform["states"]]
    c, cut, T = col(uniform, "c"), col(uniform, "cut"), col(uniform, "T")
    pred = np.mean([s["pred"]["uniform"] for s in uniform["states"]])
    share, se = mean_se(c, pids)
    assert uniform["manifest"]["truncated"]["references"] == pytest.approx(share, abs=1e-4)
    assert abs(share - pred) < 4 * se
    # paired with the state's own rollout: the excess is there (about +0.05)...
    excess, se = mean_se(c - cut, pids)
    assert excess > 4 * se and abs(excess - (pred - R)) < 4 * se
    # ...and weighting each state by T - 1 (undoing t's dependence on T) removes it
    w, se = mean_se((T - 1) * (c - cut) / np.mean(T - 1), pids)
    assert abs(w) < 4 * se
    # a stopping-time cut of the same rollouts: references are cut off as often as rollouts
    pids = [s["pid"] for s in stopping["states"]]
    excess, se = mean_se(col(stopping, "c") - col(stopping, "cut"), pids)
    assert abs(excess) < 4 * se and excess < (pred - R) / 2
    share, se = mean_se(col(stopping, "c"), pids)
    assert abs(share - R) < 4 * se


def test_references_are_unbiased_for_their_prefixes(builds):
    for d in builds[:2]:
        pids = [s["pid"] for s in d["states"]]
        for est, truth in (("c", "M"), ("ref", "V")):
            bias, se = mean_se(col(d, est) - col(d, truth), pids)
            assert abs(bias) < 4 * se, (est, bias, se)
        # and they are independent draws: E[(ref - V)^2] = V(1 - V) / n_ref
        v, n = col(d, "V"), d["mc"]
        excess, se = mean_se((col(d, "ref") - v) ** 2 - v * (1 - v) / n, pids)
        assert abs(excess) < 4 * se


def test_a_continuation_has_the_budget_the_rollout_had_left(builds):
    uniform, _, log = builds
    t_of = {}   # prompt + the rollout's own first t ids -> t (two states may share a prefix)
    for s in uniform["raw"]:
        r = uniform["rollouts"][(s["problem_id"], s["rollout_idx"])]
        t_of[tuple(r["prompt_token_ids"]) + tuple(r["response_token_ids"][: s["t"]])] = s["t"]
    assert len(log) == len(uniform["raw"]) * 10
    for req, out in log:
        t, n = t_of[req.prompt_token_ids], len(out.token_ids)
        assert req.max_tokens == B - t and n <= B - t and t + n <= B
        assert (out.finish_reason == "length") == (t + n == B)  # cut off exactly where a rollout is
