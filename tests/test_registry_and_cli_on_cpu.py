import subprocess
import sys

import pytest
from typer.testing import CliRunner

from sveb.cli import app
from sveb.core.errors import UsageError
from sveb.estimators import UnknownEstimator, make, params_fp


def test_unknown_estimator_did_you_mean():
    with pytest.raises(UnknownEstimator, match="did you mean grpo"):
        make("grp")


def test_params_coerced_and_fingerprinted():
    a = make("mcs-2")
    assert a.k == 2
    with pytest.raises(ValueError, match="-P kk: unknown parameter"):
        make("mcs-2", {"kk": "3"})
    with pytest.raises(ValueError, match="not a valid int"):
        make("hista", {"max_k": "x"})
    assert params_fp(make("mcs-1")) != params_fp(make("mcs-2"))


def test_preset_parameters_are_fixed_by_the_name():
    with pytest.raises(UsageError, match=r"^-P k: fixed to 2 by the name 'mcs-2'.*mcs-1, mcs-2, mcs-3, mcs-4\)$"):
        make("mcs-2", {"k": "3"})
    assert [make(f"mcs-{k}").k for k in (1, 2, 3, 4)] == [1, 2, 3, 4]


def test_registry_carries_roles_grids_and_flags():
    from sveb import estimators as reg
    assert reg.BASELINE == "grpo" and reg.names("baseline") == ["grpo"]
    assert reg.names("scale") == ["mcs-1", "mcs-2", "mcs-3", "mcs-4"]
    assert sorted(reg.rank(n) for n in ("mcs-1", "numca", "grpo")) == [reg.rank("grpo"), reg.rank("numca"),
                                                                          reg.rank("mcs-1")]
    assert set(reg.grid("hista-sveb")) == {"alpha", "phi", "delta", "k"}
    assert set(reg.grid("hista")) <= {"history", "read", "min_distance", "min_k", "alpha"}
    assert "numca-sveb" not in reg.names() and "numca-sveb" in reg.names(variants=True)
    for name in reg.names(variants=True):  # the entry's flags say what the class does
        e, est = reg.entry(name), make(name)
        assert (e.needs_hidden, e.needs_training, e.train_split, e.constructed) == (
            est.needs_hidden, est.needs_training, est.train_split, est.constructed), name
        assert e.role in reg.ROLES
        for key in e.grid:  # every grid axis is a parameter
            make(name, {key: e.grid[key][0]})


def test_capabilities_are_declared_once_on_the_classes():
    """capabilities.json is the classes' declaration, written by `python -m sveb.estimators.capabilities` (make docs):
    the registry reads it without importing torch; a class changed without rewriting it fails here."""
    from sveb.estimators import capabilities
    assert capabilities.compute() == capabilities.stored(), "run `make docs` (python -m sveb.estimators.capabilities)"
    assert [list(c["grid"]) for c in capabilities.compute().values()] == [
        list(c["grid"]) for c in capabilities.stored().values()]  # the grids' order is the order ablate runs


def test_estimator_by_import_path_and_entry_point(monkeypatch):
    from sveb.estimators import registry as reg  # its _PLUGINS is patched
    est = make("sveb.estimators.numca:Numca")
    assert est.name == "sveb.estimators.numca:Numca" and reg.entry(est.name).origin == "import path"
    with pytest.raises(UnknownEstimator, match="cannot load sveb.estimators.numca:Nope"):
        make("sveb.estimators.numca:Nope")
    with pytest.raises(UsageError, match="must be a @dataclass subclass"):
        make("sveb.core.records:BuildData")
    plugin = reg.Entry("my-numca", "sveb.estimators.numca:Numca", origin="my-dist")
    monkeypatch.setattr(reg, "_PLUGINS", {"my-numca": plugin, "grpo": plugin})
    assert "my-numca" in reg.entries() and reg.entry("grpo").origin == "sveb"  # no shadowing
    assert make("my-numca").name == "my-numca" and reg.role_of("my-numca") == "estimator"
    assert "Numca" in reg.entry("my-numca").description or reg.entry("my-numca").description


def test_cli_reports_sveb_errors_in_one_line_and_bugs_with_a_traceback(scripted_build, monkeypatch):
    from sveb.estimators.numca import Numca
    root, bdir = scripted_build
    args = ["eval", "--root", str(root), "--build", bdir.name]
    r = CliRunner().invoke(app, [*args, "-e", "mcs-2", "-P", "k=3"])
    assert r.exit_code == 1 and "fixed to 2" in r.output and "Traceback" not in r.output

    def broken(self, group, states):
        return 1 / 0
    monkeypatch.setattr(Numca, "estimate", broken)
    r = CliRunner().invoke(app, [*args, "-e", "numca"])
    assert isinstance(r.exception, ZeroDivisionError)  # not swallowed into "error: ..."


def test_import_and_help_do_not_load_heavy_modules():
    code = ("import sys, sveb, sveb.cli, sveb.sample.pipeline, sveb.evaluate, sveb.estimators.grpo;"
            "from typer.testing import CliRunner; CliRunner().invoke(sveb.cli.app, ['--help']);"
            "bad = [m for m in ('torch', 'vllm', 'transformers') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_ls():
    r = CliRunner().invoke(app, ["ls", "estimators"])
    assert r.exit_code == 0 and "grpo" in r.output and "mcs-4" in r.output and "baseline" in r.output
    r = CliRunner().invoke(app, ["ls", "domains"])
    assert "programming" in r.output
    r = CliRunner().invoke(app, ["ls", "nonsense"])
    assert r.exit_code == 1 and "ls nonsense" in r.output


def test_cli_bad_flags_one_line(tmp_path):
    r = CliRunner().invoke(app, ["build", "--split", "dev", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "--split dev" in r.output
    r = CliRunner().invoke(app, ["build", "--min-acc", "0.9", "--max-acc", "0.1", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "--min-acc" in r.output
    r = CliRunner().invoke(app, ["eval", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "no complete build" in r.output
    r = CliRunner().invoke(app, ["build", "--source", str(tmp_path / "missing.jsonl"), "--root", str(tmp_path),
                                 "--engine", "hf"])
    assert r.exit_code == 1 and "missing.jsonl" in r.output


def test_brief_puts_a_library_error_on_one_line_and_cuts_it():
    from sveb.core.errors import brief
    e = OSError("Couldn't deserialize thrift: Invalid data\nDeserializing page header failed.\n")
    assert brief(e) == "Couldn't deserialize thrift: Invalid data Deserializing page header failed."
    long = brief(ValueError("x " * 200), 50)
    assert len(long) == 50 and long.endswith("...") and "\n" not in long
    assert brief(KeyError()) == "KeyError"  # no text: the type names it
