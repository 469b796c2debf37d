"""A board's scores table: every accepted bundle's rows recomputed, paired against grpo, pooled over seed builds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from sveb import store
from sveb.board.folder import BoardError, bundles, known_handles, read_json
from sveb.board.pool import current_names, pooled_rows, write_verdicts
from sveb.board.validate import culprit


def rebuild(board: Path, known: dict | None = None) -> list[dict]:
    """Every accepted bundle's rows, their statistics recomputed from the bundled estimates (today's procedure),
    with paired Δ of squared error vs grpo and Holm verdicts per (build, protocol) table, then one pooled table
    per group of seed builds (kind "pooled"); written to scores.parquet and .csv. `known`: the board's builds as
    handles where the caller holds them (sveb.board.folder.known_handles)."""
    from sveb.score.pooling import base_view, rescore  # scipy
    board = Path(board)
    rows = [r for p in sorted((board / "scored").glob("*.json")) if (board / "bundles" / p.stem).is_dir()
            for r in read_json(p, [])]
    known = known if known is not None else known_handles(board)  # each manifest parsed once: identity, view
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


def rows(board: Path, known: dict | None = None) -> list[dict]:
    """The board's scores table (recomputed when missing). A table written before seed pools is recomputed only
    when every build it scores is at hand: without them the recomputation loses the paired columns, so the stored
    rows are read as they are (kind "build") and the board's files stay as they were (a committed board read in a
    fresh clone). `known`: the board's builds as handles where the caller holds them (known_handles)."""
    import pyarrow.parquet as pq
    board = Path(board)
    path = board / "scores.parquet"
    if path.exists():
        table = pq.read_table(path)
        if "kind" in table.column_names:
            return table.to_pylist()
        known = known if known is not None else known_handles(board)  # written before seed pools
        stored = table.to_pylist()
        if {r.get("content_hash") for r in stored} - set(known):
            return [{**r, "kind": "build"} for r in stored]
    return rebuild(board, known) if (board / "scored").exists() else []
