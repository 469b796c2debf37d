"""A board's folder: its board.json of registered builds, the exports under builds/, its accepted bundles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from sveb import store
from sveb.board.bundle import BundleError, read_bundle
from sveb.board.check import identity_of
from sveb.core.errors import SvebError
from sveb.store import Build
from sveb.store.builds import open_handle


class BoardError(SvebError, ValueError):
    pass


def read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as e:
        raise BoardError(f"{path}: corrupt JSON ({e.msg}); restore it or start a new board") from None


def write_json(path: Path, obj) -> None:
    store.atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable).encode())


def _jsonable(x):
    return str(x)


def register(board: Path, bdirs: list[Build] | list[Path]) -> dict[str, Path]:
    """Record builds (complete builds or exports) the board scores against; their content hash is the key."""
    conf = read_json(board / "board.json", {"format": "sveb-board", "builds": {}})
    for b in bdirs:
        build = open_handle(b, board)  # an export's tables are checked against their hashes here
        conf["builds"][identity_of(build)["content_hash"]] = stored_path(build.path, board)
    board.mkdir(parents=True, exist_ok=True)
    write_json(board / "board.json", conf)
    return known_builds(board)


def stored_path(bdir: Path, board: Path) -> str:
    """A build's path as board.json keeps it: relative to the board when the build lies beside it (a board and
    its exports committed together keep working in any clone), absolute otherwise."""
    b, home = bdir.resolve(), board.resolve().parent
    return os.path.relpath(b, board.resolve()) if b.is_relative_to(home) else str(b)


def known_builds(board: Path, conf: dict | None = None) -> dict[str, Path]:
    """content hash -> build folder: the registered ones (board.json, or `conf`) and the exports under builds/."""
    return {h: b.path for h, b in known_handles(board, conf).items()}


def known_handles(board: Path, conf: dict | None = None, opened: list[Build] = ()) -> dict[str, Build]:
    """known_builds as Build handles (each manifest parsed once, for the identity and the views); `opened`:
    handles already open (builds just registered), used as they are."""
    conf = conf if conf is not None else read_json(board / "board.json", {"builds": {}})
    builds = conf.get("builds") if isinstance(conf, dict) else None
    if not isinstance(builds, dict):
        raise BoardError(f"{board / 'board.json'}: no builds object; restore it or start a new board")
    have = {b.path.resolve(): b for b in opened}
    where = {h: Path(os.path.normpath(board.absolute() / p)) for h, p in builds.items() if isinstance(p, str)}
    out = {h: have.get(b.resolve()) or Build(b) for h, b in where.items()
           if (b / "manifest.json").exists()}  # the board may not exist yet
    for m in sorted((board / "builds").glob("*/manifest.json")):
        build = Build(m.parent)
        out.setdefault(identity_of(build)["content_hash"], build)
    return out


def bundles(board: Path) -> list[tuple[dict, pa.Table]]:
    out = []
    for p in sorted((Path(board) / "bundles").glob("*/bundle.json")):
        try:
            out.append(read_bundle(p.parent))
        except BundleError as e:  # let in by an older SVEB: the board says which one to take out
            raise BoardError(f"{e}; the board cannot use this stored bundle: remove {p.parent} and "
                             f"{Path(board) / 'scored' / p.parent.name}.json") from None
    return out
