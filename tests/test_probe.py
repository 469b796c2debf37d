"""The probe end to end on scripted builds whose model is a tiny random Llama: both regimes through evaluate
and the CLI, the fit cached under the train build by its content hash, protocol independence and blindness
to the state's own outcome (builds: conftest.py's tiny_llama_builds)."""

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.core import schema
from sveb.core.errors import EvalError
from sveb.estimators import make
from sveb.estimators import probe as probe_mod
from sveb.evaluate import evaluate
from sveb.evaluate.context import context_for, prepare
from sveb.evaluate.protocols import estimate_all, flip_own
from sveb.store.builds import group_for, load_build, state_for

torch.set_num_threads(1)
CHEAP = {"cs": "0.01,1", "folds": "2", "prefixes": "4"}


def values(bdir, name):
    rows = store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()
    return {(r["protocol"], r["state_id"]): r["value"] for r in rows if r["estimator"] == name}


@pytest.mark.parametrize("name,params", [("probe", {}), ("probe-mc", {"relative": "0", "pool": "mean"}),
                                         ("probe", {"relative": "0", "offset": "0"})])
def test_probe_end_to_end_and_cached_by_train_content(tiny_llama_builds, monkeypatch, name, params):
    root, tdir, bdir, _ = tiny_llama_builds
    params = {**CHEAP, **params}
    for p in ("held-out", "in-group"):
        row = evaluate(bdir, name, params, protocol=p)
        assert np.isfinite(row["mae"]) and row["n_states"] == 6
    v = values(bdir, name)
    ids = {sid for _, sid in v}
    assert all(0 <= x <= 1 for x in v.values())
    assert all(v[("held-out", s)] == v[("in-group", s)] for s in ids)  # never reads the own rollout's reward
    # the fit is cached under the train build and reused: a second run does not fit
    assert len(list((tdir / "probes").glob("*.pkl"))) >= 1
    monkeypatch.setattr(probe_mod, "fit_cv", lambda *a, **k: pytest.fail("refit despite the cache"))
    again = evaluate(bdir, name, params, protocol="held-out", force=True)
    assert again["mae"] == pytest.approx(row["mae"])
    v2 = values(bdir, name)
    assert all(v2[("held-out", s)] == v[("held-out", s)] for s in ids)
    # the scores' fingerprint follows the train build's content, not its name
    est, manifest = make(name, params), store.read_manifest(bdir)
    assert est.cache_key(bdir, manifest, context_for(est, bdir, manifest)) == store.content_hash(tdir)


def test_probe_is_blind_to_the_own_outcome_in_both_protocols(tiny_llama_builds):
    _, _, bdir, _ = tiny_llama_builds
    data = load_build(bdir)
    est = make("probe", CHEAP)
    prepare(est, data)
    for p in ("held-out", "in-group"):
        _, shift, _ = estimate_all(est, data, p, own=True, progress=False)
        assert np.all(shift == 0)
    s = data.states[0]
    g = group_for(data, s["problem_id"])
    st = state_for(data, s)
    assert est.estimate(g, [st])[0] == est.estimate(flip_own(g, st.rollout_idx), [st])[0]
    # the group's other rewards do move it (the leave-one-out mean is an input)
    flipped = [flip_own(g, r.rollout_idx) for r in g.rollouts if r.rollout_idx != st.rollout_idx]
    assert any(est.estimate(f, [st])[0] != est.estimate(g, [st])[0] for f in flipped)


def test_probe_refuses_bad_parameters_and_overlapping_train_build(tiny_llama_builds):
    _, _, bdir, _ = tiny_llama_builds
    data = load_build(bdir)
    with pytest.raises(Exception, match="pool=x"):
        prepare(make("probe", {"pool": "x"}), data)
    with pytest.raises(Exception, match="-P cs=a"):
        prepare(make("probe", {"cs": "a"}), data)
    with pytest.raises(EvalError, match="shares 3 problems"):
        prepare(make("probe", {"train_build": str(bdir)}), data)


def test_learning_curve_subsample_is_nested(tiny_llama_builds):
    """max_train keeps a seeded subset of the rows; a larger one contains the smaller (a curve's points)."""
    _, tdir, bdir, _ = tiny_llama_builds
    data = load_build(bdir)
    designs = []
    for k in (5, 10):
        est = make("probe", {**CHEAP, "max_train": str(k)})
        prepare(est, data)
        designs.append(est.design(tdir, est._train[1], est._tracks(tdir)))
    small, big = designs
    assert len(small["y"]) == 5 and len(big["y"]) == 10
    rows = {tuple(np.round(h[:4], 5)) + (t,) for h, t in zip(big["H"], big["S"][:, 2])}
    assert all(tuple(np.round(h[:4], 5)) + (t,) in rows for h, t in zip(small["H"], small["S"][:, 2]))


def test_cli_eval_probe(tiny_llama_builds):
    root, _, bdir, model = tiny_llama_builds
    args = ["eval", "--root", str(root), "--build", bdir.name, "--model", model, "-e", "probe",
            *[x for k, v in CHEAP.items() for x in ("-P", f"{k}={v}")]]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "probe" in r.output and "train_rows" in r.output


def test_a_stored_score_is_not_served_to_another_dtype(tiny_llama_builds, monkeypatch):
    """An estimator that reads the model stores its scores under the machine's compute pick (device, dtype): the
    same build scored where bf16 is picked does not return the fp32 run's stored values; a second bf16 run finds
    its own (no recompute). grpo reads no model: one score whatever the pick."""
    import sveb.evaluate.run as ev  # evaluate() reads compute_kind there
    _, _, bdir, _ = tiny_llama_builds
    monkeypatch.setattr(ev, "compute_kind", lambda: "cpu-float32")
    evaluate(bdir, "hista", {}, protocol="held-out")
    evaluate(bdir, "grpo", {}, protocol="held-out")
    stored = {p: p.stat().st_mtime_ns for p in (bdir / "scores").glob("part-*.parquet")}
    monkeypatch.setattr(ev, "compute_kind", lambda: "cpu-bfloat16")
    evaluate(bdir, "grpo", {}, protocol="held-out")
    assert {p: p.stat().st_mtime_ns for p in stored} == stored  # grpo: served from its store
    evaluate(bdir, "hista", {}, protocol="held-out")
    changed = [p.name for p in stored if p.stat().st_mtime_ns != stored[p]]
    assert len(changed) == 1 and changed[0].startswith("part-hista-")  # recomputed, not served
    again = {p: p.stat().st_mtime_ns for p in stored}
    evaluate(bdir, "hista", {}, protocol="held-out")
    assert {p: p.stat().st_mtime_ns for p in stored} == again  # and stored under the new pick


def test_entropies_at_the_read_positions_only_change_no_estimate(tiny_llama_builds, monkeypatch):
    """The probe computes the next-token entropy only where its states read it: its training rows and every
    estimate equal those from entropies at every position, bit for bit."""
    from sveb.estimators import probe_features
    _, tdir, bdir, _ = tiny_llama_builds
    data = load_build(bdir)

    def run():
        est = make("probe", CHEAP)
        prepare(est, data)
        d = est.design(tdir, est._train[1], est._tracks(tdir))
        return d, [est.estimate(group_for(data, s["problem_id"]), [state_for(data, s)])[0] for s in data.states]

    d_sparse, v_sparse = run()
    real = probe_features.Tracks.group
    monkeypatch.setattr(probe_features.Tracks, "group", lambda self, pid, rows, ts=None: real(self, pid, rows))
    d_full, v_full = run()
    for k in d_full:
        np.testing.assert_array_equal(d_sparse[k], d_full[k])
    assert v_sparse == v_full
