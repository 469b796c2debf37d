"""`python -m sveb.cli`: the `sveb` command."""

from sveb.cli import app

app()
