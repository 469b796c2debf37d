"""All scores under a root -> one CSV (one row per model x domain x estimator x params x protocol)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sveb.builds import load_scores
from sveb.estimators import rank
from sveb.evaluate import PROTOCOLS

COLUMNS = ["model", "domain", "estimator", "params", "protocol", "n_states", "n_problems", "mae", "mae_ci_low",
           "mae_ci_high", "rmse", "debiased_mse", "ref_noise", "oracle_floor", "own_share", "seconds", "build_fp",
           "params_fp"]


def _proto(p: str) -> int:
    return PROTOCOLS.index(p) if p in PROTOCOLS else len(PROTOCOLS)


def _order(name: str) -> tuple:
    """Baseline first, then the estimators, the scale rows (MCS@k) last, each in registry order."""
    return (*rank(name), name)


def rows(root: str | Path) -> list[dict]:
    out = [{c: r.get(c) for c in COLUMNS} for r in load_scores(root)]
    return sorted(out, key=lambda r: (r["model"], r["domain"], _proto(r["protocol"]), _order(r["estimator"]),
                                      r["params"]))


def write_csv(rows_: list[dict], out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows_:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    return out


def _default_params(name: str) -> dict | None:
    """The estimator's default parameters, or None when it cannot be built here (e.g. needs torch)."""
    try:
        from sveb.estimators import make, params_json
        return json.loads(params_json(make(name)))
    except Exception:
        return None


def labels(params: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """(estimator, params_fp) -> display name, from the params JSON of each; parameters are shown only
    where they differ from the default (or, when the default is unknown, where settings differ)."""
    by_name: dict[str, dict[str, dict]] = {}
    for (name, pfp), pj in params.items():
        try:
            by_name.setdefault(name, {})[pfp] = json.loads(pj or "{}")
        except json.JSONDecodeError:
            by_name.setdefault(name, {})[pfp] = {}
    out = {}
    for name, sets in by_name.items():
        default = _default_params(name) if any(sets.values()) else {}
        varying = {k for p in sets.values() for k in p if len({json.dumps(q.get(k)) for q in sets.values()}) > 1}
        for pfp, p in sets.items():
            shown = {k: x for k, x in p.items() if (default.get(k) != x if default is not None else k in varying)}
            out[(name, pfp)] = name + (" (" + ", ".join(f"{k}={x}" for k, x in sorted(shown.items())) + ")"
                                       if shown else "")
    for key, lab in list(out.items()):  # distinct settings must never share a name
        if sum(x == lab for x in out.values()) > 1:
            out[key] = f"{lab} [{key[1][:6]}]"
    return out


def print_pivot(rows_: list[dict], console: Console) -> None:
    """Estimators as rows, (domain, protocol) as columns, MAE [95% CI] in cells (held-out first), and
    under in-group the own-outcome share: how far the estimate moves when the state's own reward flips."""
    cols = sorted({(r["model"], r["domain"], r["protocol"]) for r in rows_}, key=lambda c: (c[0], c[1], _proto(c[2])))
    keys = []
    for r in rows_:
        k = (r["estimator"], r["params_fp"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: _order(k[0]))
    names = labels({(r["estimator"], r["params_fp"]): r["params"] for r in rows_})
    t = Table(title="MAE against the MC reference (lower is better), 95% bootstrap CI; own = own-outcome share")
    t.add_column("estimator")
    for m, d, p in cols:
        t.add_column(f"{m}\n{d} / {p}" + (" (paper)" if p == "in-group" else ""), justify="right")
    floors, noise = {}, {}
    for name, pfp in keys:
        cells = []
        for m, d, p in cols:
            hit = [r for r in rows_ if (r["estimator"], r["params_fp"], r["model"], r["domain"], r["protocol"]) == (name, pfp, m, d, p)]
            if hit:
                r = hit[0]
                floors[(m, d, p)], noise[(m, d, p)] = r.get("oracle_floor"), r.get("ref_noise")
                own = r.get("own_share")
                tail = "" if own is None else " own n/a" if own != own else f" own {own:.3f}" if own > 5e-4 else ""
                cells.append(f"{r['mae']:.3f} [{r['mae_ci_low']:.3f}, {r['mae_ci_high']:.3f}]{tail}")
            else:
                cells.append("-")
        t.add_row(names[(name, pfp)], *cells)
    fmt = lambda x: "-" if x is None or x != x else f"{x:.3f}"  # noqa: E731
    t.add_row("[dim]oracle floor (knows V)[/]", *[f"[dim]{fmt(floors.get(c))}[/]" for c in cols])
    t.add_row("[dim]ref noise (not a bound)[/]", *[f"[dim]{fmt(noise.get(c))}[/]" for c in cols])
    console.print(t)
