"""`sveb report --by KEY`: MAE broken down by a property of the problems (any key of their meta, such as a
dataset's level or subject, or a column of the problems table such as source or answer_type)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np

from sveb import store
from sveb.core import metrics, schema
from sveb.core.errors import SvebError
from sveb.present.report_format import cell as mae_cell
from sveb.score import scoring

COLUMNS = ["model", "domain", "build_fp", "protocol", "estimator", "key", "value", "n_states", "n_problems", "mae",
           "mae_ci_low", "mae_ci_high"]
TABLE_COLUMNS = ("source", "answer_type", "domain")
NONE = "(none)"


class ByError(SvebError, ValueError):
    pass


def problem_values(bdir: Path, key: str) -> dict[str, str]:
    """problem_id -> the problem's value of `key` as text ('(none)' where it has none)."""
    t = store.read_table(bdir / "problems", schema.PROBLEMS)
    out = {}
    for pid, meta, *cols in zip(*(t.column(c).to_pylist() for c in ("problem_id", "meta", *TABLE_COLUMNS))):
        m = json.loads(meta or "{}")
        v = m.get(key) if key in m else dict(zip(TABLE_COLUMNS, cols)).get(key)
        out[pid] = NONE if v is None or isinstance(v, (dict, list)) else str(v)
    return out


def _sort_key(v: str):
    """Numbers in numeric order ('2' < '10'), then text, '(none)' last."""
    try:
        return (0, float(v), "")
    except ValueError:
        return (1 if v != NONE else 2, 0.0, v)


def rows(views, key: str, labels: dict) -> list[dict]:
    """One row per build x protocol x estimator x value of key. `views` are report.View objects."""
    out, seen = [], False
    for v in views:
        bdirs = v.bdirs or [v.bdir]  # a pooled view: the seeds' builds, each state's build in v.bidx
        values = [problem_values(b, key) for b in bdirs]
        seen = seen or any(x != NONE for vals in values for x in vals.values())
        pids = v.pid if v.pid is not None else v.problem
        bidx = v.bidx if v.bidx is not None else np.zeros(len(pids), int)
        per_state = np.array([values[b].get(pid, NONE) for b, pid in zip(bidx, pids)])
        for (name, pfp, proto), est in sorted(v.est.items()):
            ok = np.isfinite(est) & np.isfinite(v.ref)
            for value in sorted(set(per_state[ok]), key=_sort_key):
                m = ok & (per_state == value)
                mae, lo, hi = scoring.mae_ci(est[m], v.ref[m], v.problem[m])
                out.append(dict(zip(COLUMNS, (v.model, v.domain, v.fp, proto, labels.get((name, pfp), name), key,
                                              value, int(m.sum()), len(set(v.problem[m])), mae, lo, hi))))
    if not seen:
        raise ByError(f"--by {key}: no problem in these builds has '{key}' in its meta (nor is it one of the "
                      f"columns {', '.join(TABLE_COLUMNS)}); `sveb ls problems --json` shows a source's meta keys")
    return out


def write_csv(rows_: list[dict], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows({k: metrics.csv_cell(k, x) for k, x in r.items()} for r in rows_)
    return path


def tables(rows_: list[dict], key: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, body) per build and protocol: a row per value of key, a column per estimator
    (MAE ± half-width of the problem-clustered 95% CI)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows_:
        groups.setdefault((r["model"], r["domain"], r["build_fp"], r["protocol"]), []).append(r)
    out = []
    for (model, domain, fp, proto), rs in groups.items():
        ests = list(dict.fromkeys(r["estimator"] for r in rs))
        cell = {(r["value"], r["estimator"]): r for r in rs}
        body = []
        for val in sorted({r["value"] for r in rs}, key=_sort_key):
            first = next(cell[(val, e)] for e in ests if (val, e) in cell)
            body.append([val, f"{first['n_states']} / {first['n_problems']}",
                         *(mae_cell(cell.get((val, e))) for e in ests)])
        out.append((f"{model} — {domain} [{fp[:8]}] — {proto}", [key, "states / problems", *ests], body))
    return out


def slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-") or "key"
