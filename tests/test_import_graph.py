"""No import circles in sveb/: every module's imports (module level, inside functions, under TYPE_CHECKING;
relative and absolute) read with `ast`, never by importing anything.

An import names the module it loads: `from sveb import x` is module sveb/x.py when that exists, else the
package sveb; `from sveb.a import f` is sveb/a.py (or sveb/a/__init__.py). A package's __init__ that runs
first is not an arrow of its own (it is one when a module names the package).

Check another tree: `python tests/test_import_graph.py PATH/TO/sveb` prints its circles (exit 1 if any).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "sveb"


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under root (root's own name is the package's)."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _target(name: str, mods: dict[str, Path]) -> str | None:
    """The module an absolute dotted name loads: itself, else its longest known prefix."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, f: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of the tree that module `name` (file f) imports anywhere in its text."""
    is_pkg = f.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
        if isinstance(node, ast.Import):
            out.update(t for a in node.names if (t := _target(a.name, mods)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package holding this module, up level-1 more
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            for a in node.names:
                sub = f"{src}.{a.name}"
                t = sub if sub in mods else _target(src, mods)
                if t:
                    out.add(t)
    out.discard(name)
    return out


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = modules(root)
    return {name: imports(name, f, mods) for name, f in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted, with a path round it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def describe(g: dict[str, set[str]], comp: list[str]) -> str:
    """The component and each arrow inside it."""
    inside = set(comp)
    arrows = [f"    {a} -> {b}" for a in comp for b in sorted(g[a] & inside)]
    return f"circle of {len(comp)} modules: {', '.join(comp)}\n" + "\n".join(arrows)


def test_no_import_cycles():
    g = graph()
    assert len(g) > 30, f"read only {len(g)} modules under {ROOT}"
    found = cycles(g)
    assert not found, "import circles in sveb/:\n" + "\n".join(describe(g, c) for c in found)


def test_reader_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg import b\n",          # inside a function; `from pkg import b` = pkg/b.py
        "b.py": "from .sub.c import x\n",                     # relative
        "sub/__init__.py": "",
        "sub/c.py": "import pkg.a\n",                          # absolute
        "d.py": "from pkg.sub import c\nfrom . import e\n",     # into the circle, not in it; a missing module
    }
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    g = graph(pkg)
    assert g["pkg.a"] == {"pkg.b"} and g["pkg.b"] == {"pkg.sub.c"} and g["pkg.sub.c"] == {"pkg.a"}
    assert g["pkg.d"] == {"pkg.sub.c", "pkg"}
    assert cycles(g) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


# The pipeline's layers, bottom first: a module may import its own package and the packages below it, never one
# above (docs/development.md#module-map). sveb/__init__.py (the version) is below everything.
LAYERS = ("core", "rewards", "data_builders", "store", "lm", "engines", "sample", "estimators", "score", "evaluate",
          "board", "present", "experiment", "cli")


def upward(g: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every arrow from a package of `layers` to one above it ("a -> b")."""
    rank = {p: i for i, p in enumerate(layers)}

    def layer(mod: str) -> int | None:
        parts = mod.split(".")
        return rank.get(parts[1]) if len(parts) > 1 else None
    return sorted(f"{a} -> {b}" for a, bs in g.items() for b in bs
                  if layer(a) is not None and layer(b) is not None and layer(b) > layer(a))


def test_layers_import_only_downward():
    g = graph()
    tops = {m.split(".")[1] for m in g if "." in m}
    assert tops <= set(LAYERS), f"packages without a layer: {sorted(tops - set(LAYERS))} (add them to LAYERS)"
    found = upward(g)
    assert not found, "imports running up the layers:\n" + "\n".join(found)


def test_upward_arrows_are_found(tmp_path):
    pkg = tmp_path / "sveb"
    for rel, text in {"__init__.py": "", "core/__init__.py": "", "core/a.py": "def f():\n    from sveb.cli import x\n",
                      "cli/__init__.py": "from sveb.core import a\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert upward(graph(pkg)) == ["sveb.core.a -> sveb.cli"]


def readers_of(g: dict[str, set[str]], below: str, above: tuple[str, ...]) -> list[str]:
    """Every arrow into package `below` from the packages `above` ("a -> b")."""
    inside = lambda m, pkg: m == pkg or m.startswith(pkg + ".")  # noqa: E731
    return sorted(f"{a} -> {b}" for a, bs in g.items() if any(inside(a, f"sveb.{p}") for p in above)
                  for b in bs if inside(b, f"sveb.{below}"))


def test_results_side_reads_nothing_of_the_build_side():
    """The build's write side (sveb.sample) is for making builds: what scores, shows or checks results takes a
    build's protocol from core and the authors' rows from score (issue 61)."""
    found = readers_of(graph(), "sample", ("estimators", "score", "board", "present"))
    assert not found, "imports of sveb.sample from the results side:\n" + "\n".join(found)


def store_readers(g: dict[str, set[str]]) -> list[str]:
    """Every arrow from a module of sveb.estimators to the store (issue 33: estimators are handed their data by the
    evaluator's context, sveb.evaluate.context; none reads builds itself)."""
    inside = lambda m, pkg: m == pkg or m.startswith(pkg + ".")  # noqa: E731
    return sorted(f"{a} -> {b}" for a, bs in g.items() if inside(a, "sveb.estimators")
                  for b in bs if inside(b, "sveb.store"))


def test_no_estimator_imports_the_store():
    found = store_readers(graph())
    assert not found, "estimators importing the store (take it from the Context instead):\n" + "\n".join(found)


def test_store_imports_in_estimators_are_found(tmp_path):
    pkg = tmp_path / "sveb"
    files = {"__init__.py": "", "store/__init__.py": "", "store/builds.py": "", "estimators/__init__.py": "",
             "estimators/a.py": "def f():\n    from sveb.store.builds import load_build\n",  # inside a function
             "estimators/b.py": "from sveb import store\n", "estimators/c.py": "import sveb.store.builds\n",
             "estimators/d.py": "from sveb.estimators import a\n"}
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert store_readers(graph(pkg)) == ["sveb.estimators.a -> sveb.store.builds", "sveb.estimators.b -> sveb.store",
                                         "sveb.estimators.c -> sveb.store.builds"]


def imports_of_tests(tests: Path) -> list[str]:
    """Every import of a test module or conftest by a file under tests/ ("file: module"); shared helpers live in
    tests/helpers (issue 61)."""
    out = []
    for f in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            out += [f"{f.relative_to(tests)}: {n}" for n in names
                    if n.split(".")[-1].startswith("test_") or n.split(".")[-1] == "conftest"]
    return out


def test_no_test_module_imports_another():
    found = imports_of_tests(Path(__file__).resolve().parent)
    assert not found, "test modules imported by other tests (move what they share to tests/helpers):\n" + \
        "\n".join(found)


def test_imports_of_test_modules_are_found(tmp_path):
    (tmp_path / "helpers").mkdir()
    files = {"test_a.py": "from test_b import x\nfrom tests.helpers.c import y\n", "test_b.py": "import conftest\n",
             "helpers/c.py": "def f():\n    from tests.test_a import z\n"}
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    assert imports_of_tests(tmp_path) == ["helpers/c.py: tests.test_a", "test_a.py: test_b", "test_b.py: conftest"]


HEAVY = ("torch", "vllm", "transformers", "ot", "ray", "sklearn")


def test_cli_import_stays_light():
    """Imports hoisted to module level (issue 33) must never make `sveb --help` heavy: importing the CLI loads
    none of the heavy libraries (a fresh interpreter; the rest of this file only reads the source)."""
    code = f"import sys, sveb.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"`import sveb.cli` loaded {r.stdout.split()}"


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    g = graph(root)
    found = cycles(g)
    print(f"{root}: {len(g)} modules, {sum(map(len, g.values()))} arrows, {len(found)} circles")
    for c in found:
        print(describe(g, c))
    sys.exit(1 if found else 0)


def test_the_slow_tier_names_tests_that_exist():
    """tests/conftest.py names the `slow` tier's modules and tests: a renamed one would silently fall into
    `make test-unit`, so each name must be a file and a test function there."""
    here = Path(__file__).resolve().parent
    sets = {t.id: ast.literal_eval(node.value) for node in ast.parse((here / "conftest.py").read_text()).body
            if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
            and t.id in ("SLOW_MODULES", "SLOW_TESTS")}  # read, not imported (no test imports conftest)
    assert set(sets) == {"SLOW_MODULES", "SLOW_TESTS"}
    missing = [m for m in sorted(sets["SLOW_MODULES"]) if not (here / f"{m}.py").exists()]
    for name in sorted(sets["SLOW_TESTS"]):
        file, test = name.split("::")
        if not (here / file).exists() or f"def {test}(" not in (here / file).read_text(encoding="utf-8"):
            missing.append(name)
    assert not missing, f"tests/conftest.py names tests that do not exist: {missing}"


def floors(g: dict[str, set[str]]) -> dict[str, int]:
    """Each sveb package's floor: 1 for one that imports no other package, else one above the highest it imports."""
    pkgs: dict[str, set[str]] = {}
    for a, bs in g.items():
        pa = a.split(".")[1] if "." in a else None
        if pa is None:
            continue
        pkgs.setdefault(pa, set()).update(b.split(".")[1] for b in bs if "." in b and b.split(".")[1] != pa)
    memo: dict[str, int] = {}

    def floor(p: str) -> int:
        if p not in memo:
            memo[p] = 1 + max((floor(q) for q in pkgs.get(p, ()) if q in pkgs), default=0)
        return memo[p]
    return {p: floor(p) for p in pkgs}


def test_the_pipeline_stands_on_eleven_floors():
    """issue 61: the package order is the pipeline order, on 11 floors (the device and dtype rules live in core,
    so the engines need nothing from lm)."""
    f = floors(graph())
    assert max(f.values()) <= 11, sorted(f.items(), key=lambda kv: kv[1])
    assert f["sample"] < f["estimators"] < f["score"] and f["engines"] < f["sample"]
