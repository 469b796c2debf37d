"""shear, pacs and hidden-align value states with SVEB's constructions from their papers' signals (the papers
define no V(s)): `sveb ls estimators` and the report say so (issue 17)."""

from typer.testing import CliRunner

from sveb import estimators as reg
from sveb.cli import app
from sveb.present.report import NOTE


def test_registry_marks_exactly_the_constructed_estimators():
    core = {"shear", "pacs", "hidden-align"}
    # beyond the core: SVEB's earlier variants
    assert core <= set(reg.CONSTRUCTED) and set(reg.CONSTRUCTED) - core <= {"pacs-sveb", "shear-sveb"}
    for name in reg.CONSTRUCTED:
        assert reg.entry(name).description.startswith("SVEB's construction from")
    assert not reg.entry("hista").constructed and not reg.entry("grpo").constructed


def test_ls_and_report_say_so():
    r = CliRunner().invoke(app, ["ls", "estimators"])
    assert r.exit_code == 0
    lines, name = {}, None  # one block per estimator: its name, then the description wrapped to the terminal
    for line in r.output.splitlines()[2:]:
        name = line.split()[0] if line[:1].strip() else name
        lines[name] = " ".join((lines.get(name, "") + " " + line).split())
    for name in ("shear", "pacs", "hidden-align"):
        assert "SVEB's construction" in lines[name] and "not the paper's" in lines[name]
    assert "construction" not in lines["hista"] and "construction" not in lines["numca"]
    assert all(name in NOTE for name in reg.CONSTRUCTED) and "not the papers' own estimators" in NOTE
