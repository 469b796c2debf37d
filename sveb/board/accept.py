"""Adding bundles to a board: each checked and scored first, then all written, or none."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from sveb.board.archive import unpack
from sveb.board.bundle import MAX_MB, BundleError, estimates_key, read_bundle
from sveb.board.check import identity_of, provenance_check, score_rows, validate
from sveb.board.folder import BoardError, known_handles, read_json, stored_path, write_json
from sveb.board.scores import rebuild
from sveb.board.txn import Undo, place
from sveb.core.errors import SvebError
from sveb.store import Build
from sveb.store.builds import load_build, open_handle


def _conflict(board: Path, meta: dict, protocols) -> str | None:
    """The bundle already on the board with the same estimator, settings and build under one of `protocols`."""
    for path in sorted((board / "scored").glob("*.json")):
        for r in read_json(path, []):
            if (r["estimator"], r["params"], r["content_hash"]) == (
                    meta["estimator"]["name"], json.dumps(meta["estimator"]["params"], sort_keys=True),
                    meta["build"]["content_hash"]) and r["protocol"] in protocols:
                return f"{r['bundle']} ({r['protocol']})"
    return None


def add(board: Path, bundle: Path, builds: list[Build] | list[Path] = (), max_mb: float | None = None
        ) -> tuple[str, str]:
    """Validate, score and store one bundle; (key, "added" | "unchanged"). Nothing is written on refusal."""
    return add_all(board, [bundle], builds, max_mb)[0]


def add_all(board: Path, bundles: list[Path], builds: list[Build] | list[Path] = (),
            max_mb: float | None = None) -> list[tuple[str, str]]:
    """Every bundle validated and scored first, then all written, or none: a refusal names its bundle and nothing
    is written (not the builds either). [(key, "added" | "unchanged")] in the order given."""
    board = Path(board)
    conf = read_json(board / "board.json", {"format": "sveb-board", "builds": {}})
    if not isinstance(conf, dict) or not isinstance(conf.get("builds"), dict):
        raise BoardError(f"{board / 'board.json'}: no builds object; restore it or start a new board")
    opened = [open_handle(b, board) for b in builds]  # an export's tables are checked against their hashes here
    for build in opened:
        conf["builds"][identity_of(build)["content_hash"]] = stored_path(build.path, board)
    known = known_handles(board, conf, opened)
    out, staged = [], []
    with tempfile.TemporaryDirectory(prefix=".sveb-bundle-") as tmp:
        for i, b in enumerate(bundles):
            try:
                got = _check(board, Path(b), known, Path(tmp) / str(i), staged, max_mb or MAX_MB)
            except SvebError as e:
                msg = str(e)
                more = f" (nothing was added: {len(bundles)} bundles are added together or not at all)" \
                    if len(bundles) > 1 else ""
                raise BundleError((msg if msg.startswith(str(b)) else f"bundle {b}: {msg}") + more) from None
            out.append(got[:2])
            if got[1] == "added":
                staged.append(got)
        undo = Undo(board, [s[0] for s in staged])
        try:  # all of it or none: a failure anywhere (the table included) leaves the board as it was
            if builds:
                _mk(board)
                write_json(board / "board.json", conf)
            for key, _, folder, _, rows in staged:
                write_json(board / "scored" / f"{key}.json", rows)
                place(folder, board / "bundles" / key)
            if staged:
                rebuild(board, known)
        except BaseException:
            undo()
            raise
    return out


def _check(board: Path, bundle: Path, known: dict, into: Path, staged: list, max_mb: float) -> tuple:
    """(key, "unchanged") or (key, "added", folder, meta, rows): a bundle checked and scored, nothing written."""
    into.mkdir()
    folder = unpack(bundle, into, max_mb)
    meta, table = read_bundle(folder)
    key = estimates_key(meta, table)  # recomputed: a bundle's own "key" is not trusted either
    meta = {**meta, "key": key, "claimed_key": meta.get("key")}
    if (board / "bundles" / key / "bundle.json").exists() or any(s[0] == key for s in staged):
        return key, "unchanged"
    want = meta["build"]["content_hash"]
    if want not in known:
        have = ", ".join(sorted(known)) or "none"
        raise BundleError(f"foreign build hash {want}: the board knows {have}; pass the build with --build DIR")
    if identity_of(known[want])["content_hash"] != want:
        raise BoardError(f"build folder {known[want]} no longer has content hash {want} (it was changed); "
                         f"register the original build with --build DIR")
    data = load_build(known[want])
    values = validate(meta, table, data)
    if meta["claimed_key"] != key:  # written by write_bundle: a changed byte, value or identity shows here
        raise BundleError(f"bundle.json key {str(meta.get('key'))[:20]} is not the hash of its estimates and identity "
                          f"({key}): the bundle was modified after it was written")
    clash = _conflict(board, meta, values) or _conflict_staged(staged, meta, values)
    if clash:
        raise BundleError(f"the board already holds {meta['estimator']['name']} with these parameters on build "
                          f"{want} (bundle {clash}); one result per estimator, setting and build")
    rows = score_rows(meta, values, data, provenance_check(meta, values, data))
    return key, "added", folder, meta, rows


def _conflict_staged(staged: list, meta: dict, protocols) -> str | None:
    """The same identity among the bundles of this add (not yet on the board)."""
    ident = lambda m: (m["estimator"]["name"], json.dumps(m["estimator"]["params"], sort_keys=True),  # noqa: E731
                       m["build"]["content_hash"])
    for key, _, _, other, rows in staged:
        if ident(other) == ident(meta) and {r["protocol"] for r in rows} & set(protocols):
            return f"{key}, in this add"
    return None


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
