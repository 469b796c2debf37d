"""The example plugin (examples/sveb-example-plugin), installed as a package, evaluated through the CLI."""

import json

import numpy as np
import pytest

from sveb import store
from sveb.core import schema
from sveb.store.builds import load_build
from tests.helpers.plugin_env import REPO, install_plugin, sveb


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    return install_plugin(tmp_path_factory)


def test_plugin_is_listed_and_evaluated_through_the_cli(installed, scripted_build):
    r = sveb(installed, "ls", "estimators")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()  # an entry's description wraps onto the lines below its name
    start = next(i for i, x in enumerate(lines) if x.startswith("group-median"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1].strip()), len(lines))
    block = " ".join(x.strip() for x in lines[start:end])
    assert "median of the group" in block and "from sveb-example-plugin" in block, block
    root, bdir = scripted_build
    r = sveb(installed, "eval", "-e", "group-median", "--protocol", "held-out", "--protocol", "in-group",
             "--root", str(root), "--build", bdir.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "group-median" in r.stdout
    data = load_build(bdir)
    est = [e for e in store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()
           if e["estimator"] == "group-median"]
    assert len(est) == 2 * len(data.states)
    for e in est:  # the plugin's own formula, under each protocol
        s = next(s for s in data.states if s["state_id"] == e["state_id"])
        rolls = data.rollouts[s["problem_id"]]
        kept = [r["reward"] for r in rolls if e["protocol"] == "in-group" or r["rollout_idx"] != s["rollout_idx"]]
        assert e["value"] == pytest.approx(np.median(kept))
    assert json.loads(est[0]["params"]) == {"empty": 0.5}


def test_plugin_grid_and_a_missing_plugin(installed, scripted_build):
    root, bdir = scripted_build
    r = sveb(installed, "ablate", "-e", "group-median", "--root", str(root), "--build", bdir.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "empty=0.0" in r.stdout
    bare = {**installed, "PYTHONPATH": str(REPO)}  # not installed: a one-line error, no traceback
    r = sveb(bare, "eval", "-e", "group-median", "--root", str(root), "--build", bdir.name)
    assert r.returncode == 1 and "unknown estimator 'group-median'" in r.stderr and "Traceback" not in r.stderr
