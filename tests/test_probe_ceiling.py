"""benchmarks/probe_ceiling.py: the cross-fitted feature ceiling never sees a state's own label or problem, and
it finds within-problem signal where the truth is known to carry it."""

import importlib.util
from pathlib import Path

import numpy as np

from sveb import store

SPEC = importlib.util.spec_from_file_location("probe_ceiling",
                                              Path(__file__).parents[1] / "benchmarks" / "probe_ceiling.py")
ceiling = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ceiling)
CS = [1e-3, 1e-1, 10.0]


def _synthetic(n_problems=40, per=6, seed=0):
    """Rows whose true value is σ(offset + 1.5 x) with x an observed scalar: known within-problem signal."""
    rng = np.random.default_rng(seed)
    clusters = np.repeat([f"b/{i}" for i in range(n_problems)], per).astype(object)
    off = np.repeat(rng.normal(0, 1, n_problems), per)
    S = rng.normal(0, 1, (len(off), 2))
    truth = 1 / (1 + np.exp(-(off + 1.5 * S[:, 0])))
    n = np.full(len(off), 24.0)
    y = rng.binomial(24, truth) / 24
    return {"H": rng.normal(0, 1, (len(off), 8)), "S": S, "off": off, "y": y, "n": n}, clusters, truth


def test_a_states_own_label_and_problem_never_move_its_ceiling():
    d, clusters, _ = _synthetic()
    base = ceiling.cross_fit(d, clusters, 5, CS, 4, 0)
    changed = {**d, "y": d["y"].copy()}
    mine = clusters == clusters[7]
    changed["y"][mine] = 1.0 - changed["y"][mine]  # every label of state 7's problem flipped
    again = ceiling.cross_fit(changed, clusters, 5, CS, 4, 0)
    assert np.array_equal(again[mine], base[mine])
    assert not np.allclose(again[~mine], base[~mine])  # the others' fits did use those labels


def test_it_finds_signal_where_the_truth_has_it():
    d, clusters, truth = _synthetic(seed=1)
    got = ceiling.cross_fit(d, clusters, 5, CS, 4, 0)
    offset_only = 1 / (1 + np.exp(-d["off"]))
    assert np.abs(got - truth).mean() < 0.6 * np.abs(offset_only - truth).mean()


def test_runs_on_a_real_hidden_state_build(tiny_llama_builds, capsys):
    from sveb.core.models import model_slug
    from sveb.evaluate import evaluate
    root, _, test, model = tiny_llama_builds
    evaluate(test, "grpo", {}, "held-out")
    argv = ["--root", str(root), "--seeds", "3", "--model", model_slug(model), "--folds", "3"]
    m = store.read_manifest(test)
    assert m["n_problems"] == 3  # the fixture's builds no longer follow its tmp path (rules.model_identity)
    out = ceiling.main(argv)
    assert out["states"] == m["n_states"] and out["problems"] == m["n_problems"]
    assert 0 <= out["mae"]["ceiling"] <= 1 and "grpo" in out["vs"]
    assert "ceiling - grpo" in capsys.readouterr().out
