"""A leaderboard of result bundles, every score recomputed here from the estimates and the build's references.

A board is a folder:
  board.json             the builds it scores against (content hash -> folder), besides any under builds/
  builds/<name>/         exports placed in the board (found by their manifest's content hash)
  bundles/<key>/         accepted bundles, as submitted (bundle.json, estimates.parquet)
  scored/<key>.json      the board's score rows of each bundle (never the submitter's)
  scores.parquet, .csv   every row, with paired Δ vs grpo and Holm verdicts per (build, protocol) table
A bundle's key hashes its estimates and identity, so adding it twice changes nothing. What is recomputed of a
bundle before it is accepted: check.py; its format: bundle.py; the pooled tables and verdicts: pool.py.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

from sveb import store
from sveb.board.archive import unpack
from sveb.board.bundle import MAX_MB, BundleError, estimates_key, read_bundle
from sveb.board.check import _identity, provenance_check, score_rows, validate
from sveb.board.pool import current_names, pooled_rows, write_verdicts
from sveb.board.txn import Undo, place
from sveb.board.validate import culprit
from sveb.core.errors import SvebError
from sveb.store.builds import load_build, open_build


class BoardError(SvebError, ValueError):
    pass


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as e:
        raise BoardError(f"{path}: corrupt JSON ({e.msg}); restore it or start a new board") from None


def _write_json(path: Path, obj) -> None:
    store.atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable).encode())


def _jsonable(x):
    return str(x)


def register(board: Path, bdirs: list[Path]) -> dict[str, Path]:
    """Record builds (complete builds or exports) the board scores against; their content hash is the key."""
    conf = _read_json(board / "board.json", {"format": "sveb-board", "builds": {}})
    for b in bdirs:
        bdir = open_build(str(b), board)  # an export's tables are checked against their hashes here
        conf["builds"][_identity(bdir)["content_hash"]] = _where(Path(bdir), board)
    board.mkdir(parents=True, exist_ok=True)
    _write_json(board / "board.json", conf)
    return known_builds(board)


def _where(bdir: Path, board: Path) -> str:
    """A build's path as board.json keeps it: relative to the board when the build lies beside it (a board and
    its exports committed together keep working in any clone), absolute otherwise."""
    b, home = bdir.resolve(), board.resolve().parent
    return os.path.relpath(b, board.resolve()) if b.is_relative_to(home) else str(b)


def known_builds(board: Path, conf: dict | None = None) -> dict[str, Path]:
    """content hash -> build folder: the registered ones (board.json, or `conf`) and the exports under builds/."""
    conf = conf if conf is not None else _read_json(board / "board.json", {"builds": {}})
    builds = conf.get("builds") if isinstance(conf, dict) else None
    if not isinstance(builds, dict):
        raise BoardError(f"{board / 'board.json'}: no builds object; restore it or start a new board")
    where = {h: Path(os.path.normpath(board.absolute() / p)) for h, p in builds.items() if isinstance(p, str)}
    out = {h: b for h, b in where.items() if (b / "manifest.json").exists()}  # the board may not exist yet
    for m in sorted((board / "builds").glob("*/manifest.json")):
        out.setdefault(_identity(m.parent)["content_hash"], m.parent)
    return out


def _conflict(board: Path, meta: dict, protocols) -> str | None:
    """The bundle already on the board with the same estimator, settings and build under one of `protocols`."""
    for path in sorted((board / "scored").glob("*.json")):
        for r in _read_json(path, []):
            if (r["estimator"], r["params"], r["content_hash"]) == (
                    meta["estimator"]["name"], json.dumps(meta["estimator"]["params"], sort_keys=True),
                    meta["build"]["content_hash"]) and r["protocol"] in protocols:
                return f"{r['bundle']} ({r['protocol']})"
    return None


def add(board: Path, bundle: Path, builds: list[Path] = (), max_mb: float | None = None) -> tuple[str, str]:
    """Validate, score and store one bundle; (key, "added" | "unchanged"). Nothing is written on refusal."""
    return add_all(board, [bundle], builds, max_mb)[0]


def add_all(board: Path, bundles: list[Path], builds: list[Path] = (), max_mb: float | None = None) -> list[tuple[str, str]]:
    """Every bundle validated and scored first, then all written, or none: a refusal names its bundle and nothing
    is written (not the builds either). [(key, "added" | "unchanged")] in the order given."""
    board = Path(board)
    conf = _read_json(board / "board.json", {"format": "sveb-board", "builds": {}})
    if not isinstance(conf, dict) or not isinstance(conf.get("builds"), dict):
        raise BoardError(f"{board / 'board.json'}: no builds object; restore it or start a new board")
    for b in builds:
        bdir = open_build(str(b), board)  # an export's tables are checked against their hashes here
        conf["builds"][_identity(bdir)["content_hash"]] = _where(Path(bdir), board)
    known = known_builds(board, conf)
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
                _write_json(board / "board.json", conf)
            for key, _, folder, _, rows in staged:
                _write_json(board / "scored" / f"{key}.json", rows)
                place(folder, board / "bundles" / key)
            if staged:
                rebuild(board)
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
    if _identity(known[want])["content_hash"] != want:
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


def bundles(board: Path) -> list[tuple[dict, pa.Table]]:
    out = []
    for p in sorted((Path(board) / "bundles").glob("*/bundle.json")):
        try:
            out.append(read_bundle(p.parent))
        except BundleError as e:  # let in by an older SVEB: the board says which one to take out
            raise BoardError(f"{e}; the board cannot use this stored bundle: remove {p.parent} and "
                             f"{Path(board) / 'scored' / p.parent.name}.json") from None
    return out


def rebuild(board: Path) -> list[dict]:
    """Every accepted bundle's rows, their statistics recomputed from the bundled estimates (today's procedure),
    with paired Δ of squared error vs grpo and Holm verdicts per (build, protocol) table, then one pooled table
    per group of seed builds (kind "pooled"); written to scores.parquet and .csv."""
    from sveb.score.pooling import base_view, rescore  # scipy
    board = Path(board)
    rows = [r for p in sorted((board / "scored").glob("*.json")) if (board / "bundles" / p.stem).is_dir()
            for r in _read_json(p, [])]
    known = known_builds(board)
    accepted = bundles(board)
    views = {}
    for h in sorted({r["content_hash"] for r in rows}):
        mine = [r for r in rows if r["content_hash"] == h]
        for r in mine:
            r["kind"] = "build"
        if h not in known:
            continue  # the build went away: rows stay, unpaired
        view, order = base_view(known[h], mine)  # the build's own stored estimates stay out: bundles only
        views[h] = view
        for meta, table in accepted:
            if meta["build"]["content_hash"] != h:
                continue
            e = meta["estimator"]
            key = (e["name"], e.get("params_fp") or "")
            view.params[key] = json.dumps(e["params"], sort_keys=True)
            cols = (table.column(c).to_pylist() for c in ("state_id", "protocol", "value", "own_shift"))
            for sid, proto, v, d in zip(*cols):
                view.est.setdefault((*key, proto), np.full(len(order), np.nan))[order[sid]] = v
                view.shift.setdefault((*key, proto), np.full(len(order), np.nan))[order[sid]] = (
                    np.nan if d is None else d)
        for r in mine:
            r.update(rescore(view, {(r["estimator"], r["params_fp"], r["protocol"]): [r]})[0])
        write_verdicts(view, mine)
    rows += pooled_rows(views)
    _write_table(board, current_names(rows))
    return rows


def _write_table(board: Path, rows: list[dict]) -> None:
    import csv
    import io

    import pyarrow.parquet as pq
    if not rows:
        return
    cols = list(dict.fromkeys(k for r in rows for k in r))
    try:  # both files made before either is written: never a new parquet beside an old csv
        table = pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows])
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise BoardError(f"{board}: scores table not written, {culprit(rows, cols)} ({type(e).__name__}); "
                         f"remove that bundle from bundles/ and scored/") from None
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    s = io.StringIO()
    w = csv.DictWriter(s, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    store.atomic_write_bytes(board / "scores.parquet", buf.getvalue().to_pybytes())
    store.atomic_write_bytes(board / "scores.csv", s.getvalue().encode())


def rows(board: Path) -> list[dict]:
    """The board's scores table (recomputed when missing)."""
    import pyarrow.parquet as pq
    path = Path(board) / "scores.parquet"
    if not path.exists() or "kind" not in pq.read_schema(path).names:  # missing, or written before seed pools
        return rebuild(board) if (Path(board) / "scored").exists() else []
    return pq.read_table(path).to_pylist()
