"""Issue 56.8: estimators are blind to the evaluated build's references by construction. A plugin that tries to
read the reference draws, the extra draws or the values learns nothing, in-process (the evaluator, an import path),
through the CLI (another process) and through a bundle on a board; a plugin that declares itself reference-scale
gets the extra draws (never the reference ones) and is kept out of every estimator family."""

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sveb import board, store
from sveb import estimators as reg
from sveb.board.submit import submit
from sveb.core import schema
from sveb.core.errors import EvalError, UsageError
from sveb.estimators.base import Estimator, view_for
from sveb.estimators.families import family_of
from sveb.evaluate import evaluate
from sveb.store.builds import load_build

pytestmark = pytest.mark.slow  # whole scripted builds and a subprocess

REPO = Path(__file__).resolve().parents[1]


def sveb(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sveb.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO)

PEEKERS = textwrap.dedent('''
    from dataclasses import dataclass
    import numpy as np
    from sveb.estimators.base import Estimator

    SEEN = []

    def _draws(build, state_id, s):
        """Every reference datum a plugin could reach: the state's extra draws, the build's extras and references."""
        ref = build.references.get(state_id) or {}
        return [*s.extra_rewards, *build.extras.get(state_id, ()), *(ref.get("mc_rewards") or ()),
                *(ref.get("extra_rewards") or ()), *([ref["value"]] if "value" in ref else [])]

    @dataclass
    class Peeker(Estimator):
        """tries to read the references"""

        def prepare(self, build, ctx=None):
            self._build = build
            SEEN.append(("prepare", len(build.references), sum(map(len, build.extras.values()))))

        def estimate(self, group, states):
            out = []
            for s in states:
                got = _draws(self._build, s.state_id, s)
                SEEN.append(("state", len(s.extra_rewards), len(got)))
                out.append(float(np.mean(got)) if got else 0.5)
            return np.array(out)

    @dataclass
    class Scaler(Estimator):
        """a declared reference-scale plugin: the mean of its first two extra draws"""
        role = "scale"
        reads_references = True

        def estimate(self, group, states):
            return np.array([float(np.mean(s.extra_rewards[:2])) for s in states])
''')


@pytest.fixture
def peekers(tmp_path, monkeypatch):
    """The plugin module on the path (as `peek_mod`), for this process and for a subprocess."""
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "peek_mod.py").write_text(PEEKERS)
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    sys.modules.pop("peek_mod", None)
    import peek_mod
    yield peek_mod, tmp_path / "plug"
    sys.modules.pop("peek_mod", None)


def _values(bdir, name):
    return {(e["protocol"], e["state_id"]): e["value"] for e in store.read_table(bdir / "estimates", schema.ESTIMATES)
            .to_pylist() if e["estimator"] == name}


def test_a_plugin_that_reads_the_references_gets_nothing_in_process(scripted_build, peekers):
    mod, _ = peekers
    root, bdir = scripted_build
    for proto in ("held-out", "in-group"):
        evaluate(bdir, "peek_mod:Peeker", {}, proto)
    got = _values(bdir, "peek_mod:Peeker")
    assert len(got) == 2 * len(load_build(bdir).states)
    assert set(got.values()) == {0.5}  # it learned nothing: every value is its fallback
    assert mod.SEEN and all(n == 0 for what, *ns in mod.SEEN for n in ns)  # empty references, extras, draws
    assert reg.role_of("peek_mod:Peeker") == "estimator" and family_of("peek_mod:Peeker", "{}") == "alone"
    sneaky = reg.make("peek_mod:Peeker")
    sneaky.reads_references = True  # declared on the class or not at all: an object cannot open the references
    assert view_for(sneaky, load_build(bdir)).extras == {}


def test_a_declared_reference_scale_plugin_gets_the_extra_draws_and_only_a_scale_label(scripted_build, peekers):
    root, bdir = scripted_build
    evaluate(bdir, "peek_mod:Scaler", {}, "held-out")
    evaluate(bdir, "mcs-2", {}, "held-out")
    mine, mcs = _values(bdir, "peek_mod:Scaler"), _values(bdir, "mcs-2")
    assert mine and mine == pytest.approx(mcs)  # exactly MCS@2: it read the extra draws
    assert reg.role_of("peek_mod:Scaler") == "scale"  # shown for scale, never "best"
    assert family_of("peek_mod:Scaler", "{}") not in ("main", "variant", "scale-variant")
    data = load_build(bdir)
    seen = view_for(reg.make("peek_mod:Scaler"), data)
    assert seen.references == {} and seen.extras == data.extras  # the extra draws, never the reference ones


def test_a_stored_import_path_row_is_labelled_by_its_class_from_its_own_folder(peekers, monkeypatch, tmp_path):
    # another process (`sveb leaderboard`, `sveb report` after `sveb eval -e peek_mod:Scaler` in that folder)
    _, plug = peekers
    monkeypatch.setattr(reg.registry, "_SEEN", {})
    monkeypatch.chdir(plug)
    assert reg.role_of("peek_mod:Scaler") == "scale" and reg.role_of("peek_mod:Peeker") == "estimator"
    monkeypatch.setattr(reg.registry, "_SEEN", {})
    monkeypatch.chdir(tmp_path)  # elsewhere a stored name imports nothing
    assert reg.role_of("peek_mod:Scaler") == "estimator" and reg.role_of("os:getcwd") == "estimator"


def test_reading_the_references_is_a_scale_estimators_alone(peekers, monkeypatch):
    @dataclass
    class Sneaky(Estimator):
        reads_references = True  # without role "scale": refused before anything runs

        def estimate(self, group, states):
            return np.zeros(len(states))
    monkeypatch.setattr(peekers[0], "Sneaky", Sneaky, raising=False)
    with pytest.raises(UsageError, match="reads_references = True needs role 'scale'"):
        reg.make("peek_mod:Sneaky")
    for e in reg.BUILTIN:  # SVEB's own: every reader of the references is a scale row in a scale family
        if e.reads_references:
            assert e.role == "scale" and family_of(e.name, None) in ("scale", "scale-variant"), e.name


def test_a_train_build_is_the_only_other_build_whose_references_an_estimator_reads(scripted_build, peekers):
    @dataclass
    class SelfTrained(Estimator):
        train_split = True  # asks for the evaluated build itself as its train build

        def train_spec(self):
            return (str(self._bench), True)

        def estimate(self, group, states):
            return np.zeros(len(states))
    root, bdir = scripted_build
    SelfTrained._bench = bdir
    peekers[0].SelfTrained = SelfTrained
    with pytest.raises(EvalError, match="shares .* problems with the benchmark build"):
        evaluate(bdir, "peek_mod:SelfTrained", {}, "held-out")


def test_blind_through_the_cli_and_through_a_bundle(scripted_build, peekers, tmp_path):
    import os
    _, plug = peekers
    root, bdir = scripted_build
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(plug)])}
    r = sveb(env, "eval", "-e", "peek_mod:Peeker", "--protocol", "held-out", "--root", root, "--build", bdir.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(_values(bdir, "peek_mod:Peeker").values()) == {0.5}
    lb = tmp_path / "board"
    for name in ("grpo", "mcs-2", "peek_mod:Peeker", "peek_mod:Scaler"):
        out = submit(bdir, name, {}, ["held-out"], tmp_path / f"b-{name.replace(':', '-')}")
        board.add(lb, out, [bdir])
    metas = {m["estimator"]["name"]: m["estimator"] for m, _ in board.bundles(lb)}
    assert metas["peek_mod:Peeker"]["reads_references"] is False and metas["peek_mod:Scaler"]["role"] == "scale"
    assert metas["peek_mod:Scaler"]["reads_references"] is True and metas["mcs-2"]["reads_references"] is True
    _, table = next((m, t) for m, t in board.bundles(lb) if m["estimator"]["name"] == "peek_mod:Peeker")
    assert set(table.column("value").to_pylist()) == {0.5}  # the bundle carries what the blind run computed
    rows = {r["estimator"]: r for r in board.rows(lb) if r["kind"] == "build"}
    assert rows["mcs-2"]["provenance_check"] == "verified"  # the board's rerun hands it its draws too
    assert rows["mcs-2"]["family"] == "scale" and rows["peek_mod:Scaler"]["family"] == "alone"
    assert rows["peek_mod:Scaler"]["role"] == "scale" and rows["peek_mod:Scaler"]["reads_references"] is True
    assert rows["peek_mod:Peeker"]["provenance_check"] == "self-declared"
