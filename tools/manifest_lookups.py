"""String-keyed manifest lookups in the code (issue 61 item 4): `manifest["model"]`, `m.get("truncated")`, ...

    .venv/bin/python tools/manifest_lookups.py [FOLDER]      # default: sveb; one line per lookup, then the count

A lookup is a subscript or `.get` with a string key on an expression that holds a build's manifest: a name
`manifest` (or ending in `_manifest`), an attribute `.manifest`, a `read_manifest(...)` call, or a name assigned
from one of those in the same function. The typed Manifest (sveb.store.Manifest) is read by attribute instead;
store/ itself parses the JSON and may look keys up by name.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _holds_manifest(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "manifest" or node.id.endswith("_manifest") or node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr == "manifest"
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Name) and f.id == "read_manifest") or \
            (isinstance(f, ast.Attribute) and f.attr == "read_manifest")
    return False


def _lookups_in(scope: ast.AST) -> list[ast.AST]:
    """The string-keyed lookups on manifests in one function (or module body)."""
    names: set[str] = set()
    for node in ast.walk(scope):  # names bound to a manifest here (m = read_manifest(b), m := data.manifest)
        if isinstance(node, (ast.Assign, ast.NamedExpr)) and _holds_manifest(node.value, set()):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and _holds_manifest(node.value, names):
            found.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and _holds_manifest(node.func.value, names):
            found.append(node)
    return found


def lookups(path: Path) -> list[tuple[int, str]]:
    """(line, source) of each string-keyed manifest lookup in one file."""
    text = path.read_text()
    tree = ast.parse(text)
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    seen: dict[tuple, ast.AST] = {}
    for scope in [tree, *scopes]:  # a nested function is scanned with its own names too; each node counted once
        for node in _lookups_in(scope):
            seen.setdefault((node.lineno, node.col_offset), node)
    return sorted((n.lineno, ast.get_source_segment(text, n) or "") for n in seen.values())


def scan(folder: Path, skip: str = "store") -> dict[str, list[tuple[int, str]]]:
    """Every file under folder with lookups, outside folder/skip (the store parses manifests)."""
    out = {}
    for p in sorted(Path(folder).rglob("*.py")):
        if skip in p.relative_to(folder).parts[:1]:
            continue
        got = lookups(p)
        if got:
            out[str(p)] = got
    return out


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "sveb")
    found = scan(folder)
    inside = sum(len(lookups(p)) for p in sorted((folder / "store").rglob("*.py"))) if (folder / "store").is_dir() \
        else 0
    for f, hits in found.items():
        for line, src in hits:
            print(f"{f}:{line}: {src}")
    print(f"{sum(map(len, found.values()))} string-keyed manifest lookups outside {folder}/store/ "
          f"(in {len(found)} files); {inside} inside it")


if __name__ == "__main__":
    main()
