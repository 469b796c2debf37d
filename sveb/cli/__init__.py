"""The `sveb` command. Argument parsing only; the work happens in the modules it calls. Each module registers its
commands on the one Typer app (sveb.cli.common) as it is imported, in the order `sveb --help` lists them."""

from sveb.cli.common import app
from sveb.cli.sampling import build, preset_config
from sveb.cli.scoring import ablate, collapse, demo, eval_, report

# isort: split
from sveb.cli import board, conformance, export, inspect, rl  # `leaderboard`, `conformance`, `export`, `ls`, `rl`...
