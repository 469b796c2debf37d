"""The example plugin (examples/sveb-example-plugin) installed for the tests that run it in a subprocess."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "examples" / "sveb-example-plugin"


def install_plugin(tmp_path_factory) -> dict:
    """The environment of a process that has the plugin installed (pip --target: offline, no venv copy)."""
    target = tmp_path_factory.mktemp("site")
    # from a copy: building in place would leave build/ and *.egg-info in the checkout
    src = shutil.copytree(PLUGIN, tmp_path_factory.mktemp("src") / PLUGIN.name,
                          ignore=shutil.ignore_patterns("build", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--no-build-isolation", "--target", str(target), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(target.glob("sveb_example_plugin-*.dist-info/entry_points.txt"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(target)])}  # this checkout's sveb first


def sveb(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sveb.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO)
