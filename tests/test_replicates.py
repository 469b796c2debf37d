"""Training-seed replicates: recognised only when the seed alone differs, summarised as mean ± sd, and kept out
of the headline Holm family (so scoring a trained estimator again cannot weaken another estimator's verdict)."""

import json
from pathlib import Path

import numpy as np
import pytest

from sveb.estimators.families import family_size
from sveb.score import pooling, replicates
from sveb.score.replicates import default_params, spread, training_seed
from sveb.score.trainings import over_trainings


def _pj(name: str, **change) -> str:
    return json.dumps({**json.loads(default_params(name)), **change}, sort_keys=True)


def test_a_replicate_differs_from_the_default_only_in_its_seed():
    d = default_params("probe")
    assert training_seed(_pj("probe", seed=2), d) == 2
    assert training_seed(d, d) is None                                  # the default row itself
    assert training_seed(_pj("probe", seed=2, pca=8), d) is None        # an ablation, not a replicate
    assert training_seed(_pj("probe", pca=8), d) is None
    assert training_seed("{}", default_params("grpo")) is None          # no seed: never a replicate


def _row(name, params, mae, delta, protocol="held-out", verdict="no difference", kind="pooled"):
    return {"model": "m", "domain": "number", "protocol": protocol, "build_fp": "a+b", "estimator": name,
            "params": params, "mae": mae, "delta_sq": delta, "verdict": verdict, "kind": kind}


def test_spread_is_mean_and_sample_sd_over_training_seeds():
    d = default_params("probe")
    rows = [_row("probe", d, 0.10, -0.01, verdict="better"), _row("probe", _pj("probe", seed=1), 0.12, 0.0),
            _row("probe", _pj("probe", seed=2), 0.14, 0.01),
            _row("probe", _pj("probe", pca=8), 0.5, 0.2),                   # an ablation: left out
            _row("probe", _pj("probe", seed=1), 0.9, 0.9, kind="seed"),     # a per-build row: left out
            _row("probe", d, 0.2, 0.0, protocol="in-group"),                 # one seed only: no spread row
            _row("grpo", "{}", 0.15, 0.0)]
    out = spread(rows, {"probe": d, "grpo": default_params("grpo")})
    assert len(out) == 1
    r = out[0]
    assert r["training_seeds"] == "0,1,2" and r["n"] == 3
    assert r["mae_mean"] == pytest.approx(0.12) and r["mae_sd"] == pytest.approx(np.std([0.1, 0.12, 0.14], ddof=1))
    assert r["delta_sq_mean"] == pytest.approx(0.0) and r["delta_sq_sd"] == pytest.approx(0.01)
    assert r["verdict"] == "–"  # no test over these trainings among the rows: no verdict (a replicate's is none)
    assert replicates.cells(out)[0][4] == "0.120 ± 0.020"


def test_spread_of_a_default_row_tested_over_its_trainings_is_that_rows_numbers():
    """Its MAE and Δ are already the means over trainings (sveb.score.pooling): the spread row takes them and their
    sds, and the verdict of the test over trainings, never a replicate's own verdict."""
    d = default_params("probe")
    rows = [{**_row("probe", d, 0.12, 0.0, verdict="better"), "trainings": 3, "training_seeds": "0,1,2",
             "mae_training_sd": 0.02, "training_sd": 0.01},
            {**_row("probe", _pj("probe", seed=1), 0.12, 0.0, verdict="replicate"), "replicate_of": "probe"},
            {**_row("probe", _pj("probe", seed=2), 0.14, 0.01, verdict="replicate"), "replicate_of": "probe"}]
    r, = spread(rows, {"probe": d})
    assert (r["training_seeds"], r["n"], r["verdict"]) == ("0,1,2", 3, "better")
    assert (r["mae_mean"], r["mae_sd"], r["delta_sq_mean"], r["delta_sq_sd"]) == (0.12, 0.02, 0.0, 0.01)


def test_replicates_and_ablations_are_tested_alone():
    rng = np.random.default_rng(0)
    n = 400
    ref = rng.uniform(0.2, 0.8, n)
    problem = np.repeat(np.arange(100), 4).astype(object)
    base = ref + rng.normal(0, 0.2, n)
    better = ref + rng.normal(0, 0.15, n)  # a real improvement
    d = default_params("probe")
    est = {("grpo", "g", "held-out"): base, ("probe", "p0", "held-out"): better}
    params = {("grpo", "g"): "{}", ("probe", "p0"): d}
    view = pooling.View(Path("b"), "m", "number", "complete", [], problem, ref, np.full(n, 0.5), est=est,
                        params=params)
    first = pooling.paired(view, "held-out")[("probe", "p0")]
    alone, alone_p = first["p_holm"], first["p_delta"]
    assert first["trainings"] == 1  # one training: said so, not pretended
    for k in range(1, 6):  # five more training seeds, each no better than grpo
        view.est[("probe", f"p{k}", "held-out")] = base + rng.normal(0, 0.01, n)
        view.params[("probe", f"p{k}")] = _pj("probe", seed=k)
    out = pooling.paired(view, "held-out")
    r0 = out[("probe", "p0")]  # the default row is now tested over its six trainings (sveb.score.trainings) ...
    d = np.stack([(view.est[("probe", f"p{k}", "held-out")] - ref) ** 2 - (base - ref) ** 2 for k in range(6)])
    assert r0["trainings"] == 6 and r0["p_delta"] == pytest.approx(over_trainings(d, problem)["p_delta"])
    # ... and the replicates never join its family: its Holm p is that p times the declared family's size
    assert alone == pytest.approx(min(1.0, family_size("main") * alone_p))
    assert r0["p_holm"] == pytest.approx(min(1.0, family_size("main") * r0["p_delta"]))
    for k in range(1, 6):  # each replicate is tested alone (sveb.estimators.families): its Holm p is its p,
        r = out[("probe", f"p{k}")]  # and its verdict is no verdict of the estimator
        assert r["family"] == "alone" and r["p_holm"] == r["p_delta"]
        assert (r["verdict"], r["replicate_of"], r["training_seed"]) == ("replicate", "probe", k)
    # the default row's MAE is the mean over its six trainings, its CI the test over trainings of the errors
    err = np.stack([np.abs(view.est[("probe", f"p{k}", "held-out")] - ref) for k in range(6)])
    want = over_trainings(err, problem)
    assert r0["mae"] == pytest.approx(np.mean([e.mean() for e in err]))
    assert (r0["mae_ci_low"], r0["mae_ci_high"]) == pytest.approx((want["delta_sq_ci_low"], want["delta_sq_ci_high"]))
    assert r0["mae_training_sd"] == pytest.approx(np.std(err.mean(1), ddof=1)) and r0["replicate_of"] is None
    assert pooling.over_trainings_row(r0) == {c: r0[c] for c in ("mae", "mae_ci_low", "mae_ci_high")}
    assert pooling.over_trainings_row(first) == {}  # one training: the row's own MAE stands
    view.est[("probe", "abl", "held-out")] = base + rng.normal(0, 0.01, n)  # an ablation is tested alone too
    view.params[("probe", "abl")] = _pj("probe", pca=8)
    out = pooling.paired(view, "held-out")
    assert out[("probe", "p0")]["p_holm"] == pytest.approx(r0["p_holm"]) and out[("probe", "abl")]["family"] == "alone"
    assert out[("probe", "abl")]["trainings"] is None  # an ablation is not a training of the default
