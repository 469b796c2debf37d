"""Accuracy against cost: MAE (95% CI) of every estimator on a board against the extra tokens it samples per
state, with MCS@1..k, recomputed from the build's own independent draws, as the reference curve. An estimator
below the curve is worth its cost. The x axis is symmetric-log: 0 extra tokens (group-based estimators) is
shown at 0, the rest on a log scale. And the same in rollout units (`keq_plot`): k_eq against seconds per state,
with the MCS@k line (k_eq = k at k continuations' sampling time): a point above the line buys its accuracy
cheaper than sampling does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from sveb.core.cost import continuation_tokens
from sveb.present.plots import palette
from sveb.score import scoring

DPI = 110
TOP = 40.0  # k_eq axis top: an interval open above is drawn to it


def mcs_curve(data) -> list[dict]:
    """MCS@k for k = 1..(the build's extra draws per state): extra tokens per state, MAE and its clustered CI,
    and its k_eq [CI] (sveb.score.rollout_eq: about k, as a check of the build's draws)."""
    from sveb.score.rollout_eq import k_eq
    states = data.states
    if not states:
        return []
    ref = np.array([data.references[s["state_id"]]["value"] for s in states], dtype=float)
    pids = np.array([s["problem_id"] for s in states])
    extras = [data.extras.get(s["state_id"], ()) for s in states]
    kmax = min(len(e) for e in extras)
    per = continuation_tokens(states)
    n_ref = int(data.references[states[0]["state_id"]].get("n_ref") or 20)
    out = []
    for k in range(1, kmax + 1):
        v = np.array([np.mean(e[:k]) for e in extras])
        mae, lo, hi = scoring.mae_ci(v, ref, pids)
        out.append({"k": k, "extra_tokens_per_state": k * per, "mae": mae, "mae_ci_low": lo, "mae_ci_high": hi,
                    **k_eq(v, ref, n_ref, pids)})
    return out


def _num(x) -> float:
    return float(x) if x is not None else float("nan")


def error_bar(m: float, lo: float, hi: float) -> tuple[float, tuple[float, float], bool]:
    """(y, (down, up) error lengths, open above) of one point: an unbounded value (k_eq with debiased MSE <= 0)
    sits at its lower bound, an interval open above reaches the axis top, a missing bound draws no bar."""
    up = m == np.inf
    y = lo if up else m
    down = y - lo if np.isfinite(y) and np.isfinite(lo) else 0.0
    top = min(hi, TOP) if not np.isnan(hi) else float("nan")
    return y, (max(down, 0.0), max(top - y, 0.0) if np.isfinite(y) and np.isfinite(top) else 0.0), up


YLABEL = {"mae": "MAE vs reference (95% CI)", "k_eq": "k_eq: worth k rollouts (95% CI)"}


def cost_plot(rows: list[dict], curves: dict[str, list[dict]], title: str, path: Path, metric: str = "mae") -> Path:
    """cost_figure saved to `path`."""
    return _save(cost_figure(rows, curves, title, metric), path, tight=False)  # its layout leaves the legend room


def cost_figure(rows: list[dict], curves: dict[str, list[dict]], title: str, metric: str = "mae"):
    """One panel per (build, protocol) of a domain: a point per estimator row, the MCS curve of its build.
    rows: board rows of one domain; curves: content hash -> mcs_curve. metric: mae, or k_eq (log scale; an
    unbounded k_eq is drawn at its lower bound as an upward triangle)."""
    builds = sorted({r["content_hash"] for r in rows})
    protos = sorted({r["protocol"] for r in rows}, key=lambda p: p != "held-out")
    names = sorted({r["estimator"] for r in rows})
    colour = palette(names)
    # a row per protocol, a column per build, and one legend beside them: a legend per panel covered the points
    # once a domain had two dozen estimators
    fig = Figure(figsize=(4.8 * len(builds) + 2.2, 3.9 * len(protos) + 0.5), dpi=DPI)
    grid = fig.subplots(len(protos), len(builds), squeeze=False)
    panels = [(h, proto) for proto in protos for h in builds]
    for ax, (h, proto) in zip(grid.ravel(), panels):
        curve = curves.get(h, [])
        if curve:
            x = [c["extra_tokens_per_state"] for c in curve]
            keys = (metric, f"{metric}_ci_low", f"{metric}_ci_high")
            bars = [error_bar(*(_num(c.get(k)) for k in keys)) for c in curve]
            y = np.array([b[0] for b in bars])
            ax.errorbar(x, y, yerr=np.array([b[1] for b in bars]).T, color="#888888", marker="s", ms=4, lw=1.2,
                        capsize=2, zorder=1, label="MCS@1..k (reference curve)")
            for c, yk in zip(curve, y):
                ax.annotate(f"@{c['k']}", (c["extra_tokens_per_state"], yk), textcoords="offset points",
                            xytext=(4, 4), fontsize=7, color="#666666")
        for r in sorted((r for r in rows if (r["content_hash"], r["protocol"]) == (h, proto)),
                        key=lambda r: r["estimator"]):
            m, err, up = error_bar(*(_num(r.get(k)) for k in (metric, f"{metric}_ci_low", f"{metric}_ci_high")))
            if not np.isfinite(m):
                continue
            ax.errorbar([_num(r.get("extra_tokens_per_state"))], [m], yerr=[[err[0]], [err[1]]],
                        fmt="^" if up else "o", ms=6, capsize=3, color=colour[r["estimator"]],
                        label=r["estimator"], zorder=2)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=-0.3)
        if metric == "k_eq":
            ax.set_yscale("log")
            ax.set_ylim(0.2, TOP)
        ax.set_xlabel("extra sampled tokens per state (0, then log)")
        ax.set_ylabel(YLABEL.get(metric, metric))
        ax.set_title(f"build {h} · {proto}", fontsize=9)
        ax.grid(alpha=0.3)
    seen: dict[str, object] = {}
    for ax in grid.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / fig.get_figwidth(), 0.97))
    fig.legend(list(seen.values()), list(seen), fontsize=7, loc="center left", frameon=False,
               bbox_to_anchor=(1 - 1.95 / fig.get_figwidth(), 0.5))
    return fig


def mcs_k(name: str) -> int | None:
    """k of SVEB's MCS@k rows ("mcs-3"), else None (the authors' "mcs-3-ref" rows are not fresh draws)."""
    head, _, k = name.rpartition("-")
    return int(k) if head == "mcs" and k.isdigit() else None


def keq_plot(points: dict[str, list[dict]], rollout_s: dict[str, float | None], title: str, path: Path) -> Path:
    """k_eq (95% CI) against seconds per state, one panel per domain, one point per estimator; the line is MCS@k
    (k_eq = k at k continuations' sampling time, `rollout_s` seconds each), and MCS@k's own rows sit at their
    sampling time. points: domain -> [{estimator, seconds, k_eq, k_eq_ci_low, k_eq_ci_high}]. An estimator with no
    finite k_eq (debiased MSE <= 0) is drawn at its lower bound as an upward triangle."""
    domains = sorted(points)
    names = sorted({p["estimator"] for ps in points.values() for p in ps})
    colour = palette(names)
    fig = Figure(figsize=(4.6 * max(len(domains), 1) + 0.4, 4.4), dpi=DPI)
    axes = fig.subplots(1, max(len(domains), 1), squeeze=False).ravel()
    for ax, d in zip(axes, domains):
        s1 = rollout_s.get(d)
        if s1:
            ks = np.arange(1, 33)
            ax.plot(ks * s1, ks, color="#888888", ls="--", lw=1.2, zorder=1, label="MCS@k (k = k_eq)")
        for p in sorted(points[d], key=lambda p: p["estimator"]):
            k = mcs_k(p["estimator"])
            x = k * s1 if k and s1 else _num(p.get("seconds"))
            y, lo, hi = (_num(p.get(c)) for c in ("k_eq", "k_eq_ci_low", "k_eq_ci_high"))
            if not (np.isfinite(x) and x > 0 and np.isfinite(lo) and lo > 0):
                continue
            up = not np.isfinite(y)
            y = lo if up else y
            top = hi if np.isfinite(hi) else 40.0
            ax.errorbar([x], [y], yerr=[[y - lo], [top - y]], fmt="^" if up else "o", ms=6, capsize=3,
                        color=colour[p["estimator"]], label=p["estimator"], zorder=2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(0.2, 40)
        ax.set_xlabel("seconds per state (MCS@k: k continuations' sampling)")
        ax.set_ylabel("k_eq: worth k rollouts (95% CI)")
        ax.set_title(d, fontsize=9)
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="best")
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def keq_dots(points: list[dict], title: str, path: Path) -> Path:
    """One domain's k_eq [95% CI] per estimator on a log axis, sorted, MCS@k dashed at k: what each estimate is
    worth in fresh rollouts, readable without a cost axis (the README's headline picture). points: [{estimator,
    k_eq, k_eq_ci_low, k_eq_ci_high}]; an unbounded k_eq is drawn at its lower bound as a right triangle."""
    rows = [(p["estimator"], *(_num(p.get(c)) for c in ("k_eq", "k_eq_ci_low", "k_eq_ci_high"))) for p in points]
    rows = sorted((r for r in rows if np.isfinite(r[2]) and r[2] > 0), key=lambda r: r[2] if not np.isfinite(r[1])
                  else r[1])
    colour = palette([r[0] for r in rows])
    fig = Figure(figsize=(7.2, 0.28 * len(rows) + 1.2), dpi=DPI)
    ax = fig.subplots()
    for k in range(1, 5):
        ax.axvline(k, color="#bbbbbb", ls="--", lw=0.8, zorder=0)
    for i, (name, y, lo, hi) in enumerate(rows):
        up = not np.isfinite(y)
        y = lo if up else y
        top = hi if np.isfinite(hi) else 40.0
        ax.errorbar([y], [i], xerr=[[y - lo], [top - y]], fmt=">" if up else "o", ms=5, capsize=2,
                    color=colour[name], zorder=2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(0.3, 12)
    ax.set_xticks([0.5, 1, 2, 3, 4, 8])
    ax.set_xticklabels(["0.5", "1", "2", "3", "4", "8"])
    ax.set_xlabel("k_eq: worth k fresh rollouts (95% CI; dashed: k = 1..4)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="x", which="both")
    return _save(fig, path)


def _save(fig, path: Path, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path
