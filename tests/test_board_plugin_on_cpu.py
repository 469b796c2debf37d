"""An outside estimator's bundle on a board: the example plugin installed as a package (its distribution and
version recorded), and the same class loaded by module:Class path from a folder (no distribution)."""

import json
import os
import shutil

import pytest

from sveb import board, store
from sveb.board.bundle import read_bundle
from sveb.core import schema
from tests.helpers.plugin_env import PLUGIN, REPO, install_plugin, sveb


@pytest.fixture(scope="module")
def envs(tmp_path_factory) -> dict:
    """Environments of processes with the plugin installed (pip --target, offline), or only on the path."""
    loose = tmp_path_factory.mktemp("loose")
    shutil.copy2(PLUGIN / "sveb_example_plugin.py", loose)
    return {"installed": install_plugin(tmp_path_factory),
            "path": {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(loose)])}}


def test_plugin_bundles_are_accepted_with_their_provenance(envs, scripted_build, tmp_path):
    root, bdir = scripted_build
    lb = tmp_path / "board"
    for kind, name in (("installed", "group-median"), ("path", "sveb_example_plugin:GroupMedian")):
        out = tmp_path / f"bundle-{kind}"
        r = sveb(envs[kind], "submit", "-e", name, "--root", root, "--build", bdir.name, "--out", out,
                 "--archive", "zip")
        assert r.returncode == 0, r.stdout + r.stderr
        assert (tmp_path / f"bundle-{kind}.zip").exists()
        # the board runs here, where the plugin is not installed: it needs the estimates, never the code
        key, status = board.add(lb, tmp_path / f"bundle-{kind}.zip", [bdir])
        assert status == "added"
    prov = {m["estimator"]["name"]: m["estimator"]["provenance"] for m, _ in board.bundles(lb)}
    assert prov["group-median"] == {"kind": "plugin", "distribution": "sveb-example-plugin", "version": "0.1.0",
                                    "target": "sveb_example_plugin:GroupMedian"}
    assert prov["sveb_example_plugin:GroupMedian"]["kind"] == "import path"
    assert prov["sveb_example_plugin:GroupMedian"]["distribution"] is None
    got = {(r["estimator"], r["protocol"]): r for r in board.rows(lb)}
    stored = {(r["estimator"], r["protocol"]): r for r in store.read_table(bdir / "scores", schema.SCORES).to_pylist()}
    for key in (("group-median", "held-out"), ("group-median", "in-group")):
        assert got[key]["mae"] == pytest.approx(stored[key]["mae"])  # rescored to what `sveb eval` stored
        assert got[key]["provenance"] == "plugin" and got[key]["distribution"] == "sveb-example-plugin"
        assert got[key]["version"] == "0.1.0"
        assert got[key]["verdict"] == "n/a"  # grpo is not on this board: no paired column
    meta, _ = read_bundle(lb / "bundles" / got[("group-median", "held-out")]["bundle"])
    assert json.dumps(meta["estimator"]["params"]) == '{"empty": 0.5}'
