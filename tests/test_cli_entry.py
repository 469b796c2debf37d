"""The one handler round every command: SVEB's errors and Ctrl-C end in one line, a bug keeps its traceback."""

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from sveb.cli import app
from sveb.core.errors import UsageError


def test_sveb_error_from_any_command_is_one_line(monkeypatch, tmp_path):
    import sveb.present.report

    def refuse(*a, **k):
        raise UsageError("--by colour: no [such] key")  # brackets: printed as written, not as rich markup
    monkeypatch.setattr(sveb.present.report, "write_report", refuse)
    r = CliRunner().invoke(app, ["report", "--root", str(tmp_path), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 1 and r.output == "error: --by colour: no [such] key\n"


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch):
    import sveb.core.models

    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(sveb.core.models, "listing", interrupted)
    r = CliRunner().invoke(app, ["ls", "models"])
    assert r.exit_code == 130 and "Traceback" not in r.output and "Aborted" not in r.output
    assert r.output.splitlines()[-1].startswith("interrupted: ")  # after what the command had printed


def test_a_bug_is_not_swallowed(monkeypatch):
    import sveb.core.models

    def bug():
        return 1 / 0
    monkeypatch.setattr(sveb.core.models, "listing", bug)
    r = CliRunner().invoke(app, ["ls", "models"])
    assert isinstance(r.exception, ZeroDivisionError)


def test_console_script_goes_through_the_handler(tmp_path):
    # the installed entry point runs the same app: an unknown `ls` is one line on stderr, exit 1, no traceback
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", "from sveb.cli import app; app()", "ls", "nonsense"],
                       capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(root), "PATH": ""})
    assert r.returncode == 1 and r.stdout == "" and r.stderr.startswith("error: ls nonsense")
    assert r.stderr.count("\n") == 1, r.stderr
    scripts = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert 'sveb = "sveb.cli:app"' in scripts
