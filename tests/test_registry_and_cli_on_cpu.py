import subprocess
import sys

import pytest
from typer.testing import CliRunner

from sveb.cli import app
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
        make("mcs-2", {"k": "x"})
    assert params_fp(make("mcs-1")) != params_fp(make("mcs-2"))


def test_import_and_help_do_not_load_heavy_modules():
    code = ("import sys, sveb, sveb.cli, sveb.pipeline, sveb.evaluate, sveb.estimators.grpo;"
            "from typer.testing import CliRunner; CliRunner().invoke(sveb.cli.app, ['--help']);"
            "bad = [m for m in ('torch', 'vllm', 'transformers') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_ls():
    r = CliRunner().invoke(app, ["ls", "estimators"])
    assert r.exit_code == 0 and "grpo" in r.output and "mcs-k" in r.output
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
