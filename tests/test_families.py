"""Issue 32, item 3: Holm families are declared, not inferred from the table or from what is installed."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sveb.estimators import families
from sveb.score import pooling, scoring


def test_stored_defaults_are_the_estimators_defaults():
    # `python -m sveb.estimators.families` rewrites the file; a changed default must be recorded there
    assert families.compute_defaults() == families.defaults()


def test_declared_members():
    d = families.declared_members()
    assert d["scale"] == ("mcs-1", "mcs-2", "mcs-3", "mcs-4")
    assert {"numca", "hista", "shear", "ppo-1", "ppo-n", "pacs", "probe"} <= set(d["main"])
    assert "grpo" not in sum(d.values(), ())
    assert {"numca-sveb", "hista-sveb"} <= set(d["variant"])
    assert not set(d["main"]) & set(d["variant"])


def test_family_of_a_row():
    ppo = families.defaults()["ppo-1"]
    assert families.family_of("ppo-1", json.dumps(ppo)) == "main"
    assert families.family_of("ppo-1", None) == "main"
    assert families.family_of("ppo-1", json.dumps({**ppo, "seed": ppo["seed"] + 7})) == "alone"  # a replicate
    assert families.family_of("numca", json.dumps({**families.defaults()["numca"], "merge": 0})) == "alone"
    assert families.family_of("mcs-2", json.dumps(families.defaults()["mcs-2"])) == "scale"
    assert families.family_of("my_plugin:Est", "{}") == "alone"
    assert families.family_of("numca", "not json") == "alone"


def test_families_do_not_depend_on_torch_being_installed():
    # the reported bug: without torch, ppo-1's training-seed replicates joined the main family
    code = """
import sys, json
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers', 'vllm'):
            raise ImportError('blocked ' + name)
sys.meta_path.insert(0, Block())
from sveb.estimators import families
d = families.defaults()['ppo-1']
print(families.family_of('ppo-1', json.dumps(d)), families.family_of('ppo-1', json.dumps({**d, 'seed': 99})))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["main", "alone"]


def _view(est: dict, ref, problems) -> pooling.View:
    n = len(ref)
    v = pooling.View(Path("b"), "m", "number", "complete", [], np.asarray(problems, dtype=object), np.asarray(ref),
                     np.full(n, 0.5), pid=np.asarray(problems, dtype=object))
    for i, ((name, pj), values) in enumerate(est.items()):
        key = (name, f"fp{i}", "held-out")
        v.est[key] = np.asarray(values, float)
        v.params[key[:2]] = pj
    return v


def test_scoring_another_setting_never_moves_a_declared_verdict():
    rng = np.random.default_rng(3)
    problems = np.repeat(np.arange(40), 3)
    truth = rng.uniform(0, 1, len(problems))
    ref = rng.binomial(20, truth) / 20
    d = families.defaults()
    est = {("grpo", "{}"): np.clip(truth + rng.normal(0, 0.2, len(truth)), 0, 1),
           ("numca", json.dumps(d["numca"])): np.clip(truth + rng.normal(0, 0.1, len(truth)), 0, 1),
           ("hista", json.dumps(d["hista"])): np.clip(truth + rng.normal(0, 0.25, len(truth)), 0, 1)}
    before = pooling.paired(_view(est, ref, problems), "held-out")
    more = dict(est)
    for i in range(5):  # an ablation grid of numca: five more settings in the same table
        key = ("numca", json.dumps({**d["numca"], "merge": 10 * i + 1}))
        more[key] = np.clip(truth + rng.normal(0, 0.1, len(truth)), 0, 1)
    after = pooling.paired(_view(more, ref, problems), "held-out")
    for k, r in before.items():
        a = after[k]
        assert a["family"] == r["family"] == "main"
        assert a["p_holm"] == r["p_holm"] and a["verdict"] == r["verdict"]
    m = families.family_size("main")
    got = [before[k] for k in sorted(before)]
    assert [r["p_holm"] for r in got] == pytest.approx(list(scoring.holm([r["p_delta"] for r in got], m=m)))
    alone = [r for k, r in after.items() if k not in before]
    assert len(alone) == 5 and all(r["family"] == "alone" and r["p_holm"] == r["p_delta"] for r in alone)
    for r in after.values():  # the Holm-adjusted interval excludes 0 exactly when the verdict says so
        lo, hi = r["delta_sq_holm_low"], r["delta_sq_holm_high"]
        assert (lo > 0 or hi < 0) == (r["verdict"] != "no difference")
        assert lo <= r["delta_sq_ci_low"] and hi >= r["delta_sq_ci_high"]


def test_rows_stored_under_the_old_name_are_the_variant():
    # before the rename, `hista` / `shear` rows were SVEB's reading; they carry the old settings (and lack
    # parameters added since): they are tested in the variant family, not the main one, and not alone
    d = families.defaults()
    assert families.family_of("hista", json.dumps(d["hista-sveb"])) == "variant"
    old_shear = {k: v for k, v in d["shear-sveb"].items() if k not in ("tail", "span", "compare", "minimum", "readout")}
    assert families.family_of("shear", json.dumps(old_shear)) == "variant"
    assert families.family_of("shear", json.dumps({**old_shear, "w": 7})) == "alone"
