"""How often one `sveb` command crosses into the store and reads a build's manifest (issue 61 item 4).

    .venv/bin/python tools/store_trace.py [--build results/table4/exports/number] [--estimator grpo] [--stored]

Runs `sveb eval --estimator E --build <a copy of the export> --force` in this process (a copy: eval writes its scores
into a writable build) with a profiler on, and prints:
- store entries: calls from code outside sveb/store/ into a function of sveb/store/ (each call and each call site);
- package-face entries: of those, the calls made through `sveb.store`'s own names (`store.read_table`, ...);
- manifest reads: calls of read_manifest (from anywhere), i.e. how often a manifest.json is parsed, each with the
  name of the build folder it was read from (the copy is named after the export: `number`).
--stored: without --force (the scores already stored: the walk a rerun takes).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = str(ROOT / "sveb" / "store") + "/"


def trace(argv: list[str]) -> dict:
    """Run the CLI with argv under a profiler; the counts of store crossings and manifest reads."""
    import sveb.store as face
    from sveb.cli import app
    from sveb.store import manifest as manifest_mod

    face_codes = {getattr(face, n).__code__ for n in dir(face) if hasattr(getattr(face, n), "__code__")}
    read_code = manifest_mod.read_manifest.__code__
    entries: collections.Counter = collections.Counter()
    via_face: collections.Counter = collections.Counter()
    reads: collections.Counter = collections.Counter()

    def site(frame) -> str:
        f = frame.f_code.co_filename
        return f"{Path(f).relative_to(ROOT) if f.startswith(str(ROOT)) else f}:{frame.f_lineno}"

    def prof(frame, event, arg):
        if event != "call":
            return
        code, caller = frame.f_code, frame.f_back
        if caller is None:
            return
        if code is read_code:  # named by the first caller outside the store (the one that asked)
            outer = caller
            while outer.f_back is not None and outer.f_code.co_filename.startswith(STORE):
                outer = outer.f_back
            via = "" if outer is caller else f" via {caller.f_code.co_name}"
            reads[(f"{site(outer)}{via}", Path(frame.f_locals.get("bdir", "?")).resolve())] += 1
        mine = caller.f_code.co_filename.startswith(str(ROOT))  # not the interpreter's own (imports, Counter)
        if code.co_filename.startswith(STORE) and mine and not caller.f_code.co_filename.startswith(STORE):
            entries[f"{site(caller)} -> {code.co_name}"] += 1
            if code in face_codes:
                via_face[f"{site(caller)} -> {code.co_name}"] += 1

    sys.setprofile(prof)
    try:
        app(argv, standalone_mode=False)
    finally:
        sys.setprofile(None)
    return {"entries": entries, "via_face": via_face, "reads": reads}


def show(title: str, counts: collections.Counter) -> None:
    print(f"{title}: {sum(counts.values())} calls at {len(counts)} call sites")
    for k, n in sorted(counts.items()):
        print(f"  {n:5d}  {k if isinstance(k, str) else f'{k[0]} <- {k[1].name}'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="results/table4/exports/number")
    ap.add_argument("--estimator", default="grpo")
    ap.add_argument("--stored", action="store_true", help="the scores already stored: no --force")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(a.build).name
        shutil.copytree(ROOT / a.build, copy)
        argv = ["eval", "--estimator", a.estimator, "--build", str(copy)] + ([] if a.stored else ["--force"])
        got = trace(argv)
        mine = sum(n for (_, folder), n in got["reads"].items() if folder == copy.resolve())
    print(f"sveb {' '.join(argv[:3])} --build <copy of {a.build}>{'' if a.stored else ' --force'}")
    show("store entries (outside sveb/store/ -> sveb/store/)", got["entries"])
    show("of them through the package face (sveb.store.X)", got["via_face"])
    show("manifest reads (read_manifest)", got["reads"])
    print(f"the evaluated build's manifest.json: parsed {mine} time(s)")


if __name__ == "__main__":
    main()
