"""Report figures. Uses matplotlib's object API (no pyplot), so no global backend or state is touched."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from sveb.estimators import rank, role_of

DPI = 110
NEAR = 0.05  # |V_est - V_grpo| below this counts as "same as GRPO"
# tab10 then tab20's light halves, greys left out (they are the scale rows'): 18 colours before generated ones
_TAB = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
        "#aec7e8", "#ff9896", "#98df8a", "#c5b0d5", "#ffbb78", "#c49c94", "#f7b6d2", "#9edae5", "#dbdb8d"]


def is_scale(label: str) -> bool:
    """Whether a label (estimator name, maybe with settings) is a reference-scale row of the registry."""
    return role_of(label.split(" ")[0]) == "scale"


def _colour(i: int) -> str:
    """The i-th colour of the non-scale rows: _TAB, then hues a golden angle apart."""
    if i < len(_TAB):
        return _TAB[i]
    import colorsys
    r, g, b = colorsys.hsv_to_rgb((i * 0.618034) % 1, 0.75 if i % 2 else 0.5, 0.8 if i % 3 else 0.6)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def palette(labels: list[str]) -> dict[str, str]:
    """One colour per label, never shared (a legend must tell every row apart), stable across the figures of one
    call: scale rows (MCS@k) in greys, light to dark in registry order; the others in _TAB's order, then
    generated hues."""
    labels = list(dict.fromkeys(labels))
    out, used, i = {}, set(), 0
    scale = sorted((lab for lab in labels if is_scale(lab)), key=lambda lab: (rank(lab.split(" ")[0]), lab))
    for j, lab in enumerate(scale):  # #c0c0c0 (light) to #404040 (dark), one step apart at least
        v = round(0xC0 - (0xC0 - 0x40) * j / max(len(scale) - 1, 1)) if len(scale) <= 0x80 else 0xC0 - j
        out[lab] = "#%02x%02x%02x" % ((max(v, 0),) * 3)
    used = set(out.values())
    for lab in labels:
        if lab not in out:
            while _colour(i) in used:
                i += 1
            out[lab] = _colour(i)
            used.add(out[lab])
            i += 1
    return out


def _grid(n: int, ncols: int = 4, w: float = 3.3, h: float = 2.7, title: str = "", **kw):
    nrows = -(-n // max(1, ncols))
    ncols = max(1, -(-n // nrows))  # balance rows: 5 panels -> 3 + 2, not 4 + 1
    fig = Figure(figsize=(max(w * ncols + 0.4, 5.0), h * nrows + 0.9), dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(_wrap(title, fig), fontsize=11)
    return fig, axes[:n]


def _wrap(title: str, fig: Figure) -> str:
    """Long model names must not run off the figure: wrap at ~10 characters per inch."""
    width = int(fig.get_figwidth() * 10)
    return "\n".join(textwrap.fill(line, width) for line in title.split("\n"))


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def hist_diffs(panels: list[tuple[str, np.ndarray]], colors: dict, title: str, path: Path) -> Path:
    """One histogram of V_est - V_grpo per estimator (paper Fig. 2, 6-8)."""
    fig, axes = _grid(len(panels), title=title)
    bins = np.linspace(-1.025, 1.025, 42)  # a bin centred on 0, where estimates equal to GRPO's land
    for ax, (lab, d) in zip(axes, panels):
        d = d[np.isfinite(d)]
        ax.hist(np.clip(d, -1, 1), bins=bins, color=colors.get(lab, "C0"), edgecolor="white", linewidth=0.4)
        ax.axvline(0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xlim(-1.05, 1.05)
        ax.set_xticks([-1, -0.5, 0, 0.5, 1])
        ax.set_title(lab, fontsize=10)
        near = np.mean(np.abs(d) <= NEAR) if len(d) else float("nan")
        ax.text(0.03, 0.95, f"|Δ| ≤ {NEAR}: {near:.0%}\nn = {len(d)}", transform=ax.transAxes, va="top",
                fontsize=8, bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="0.8", alpha=0.9))
        ax.set_xlabel("V_est − V_grpo (value units)", fontsize=9)
        ax.set_ylabel("states", fontsize=9)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=8)
    return _save(fig, path)


def mae_bars(columns: list[str], series: dict[str, list[tuple[float, float, float]]], floors: list[float],
             colors: dict, title: str, path: Path) -> Path:
    """Dot plot of MAE with 95% CI per estimator, grouped by domain; oracle floor dashed per domain."""
    n = max(len(series), 1)
    fig = Figure(figsize=(min(12.0, max(5.5, 2.0 + len(columns) * (0.3 * n + 0.6))), 4.2), dpi=DPI)
    ax = fig.subplots()
    span = 0.8
    offs = (np.arange(n) - (n - 1) / 2) * (span / n)
    for j, (lab, vals) in enumerate(series.items()):
        a = np.array([[np.nan if v is None else v for v in t] for t in vals], dtype=float).reshape(-1, 3)
        ok = np.isfinite(a[:, 0])
        if ok.any():
            m, lo, hi = a[ok].T
            err = np.nan_to_num(np.maximum(np.vstack([m - lo, hi - m]), 0))  # CI unknown -> no bar
            ax.errorbar(np.flatnonzero(ok) + offs[j], m, yerr=err, fmt="s" if is_scale(lab) else "o",
                        color=colors.get(lab, "C0"), capsize=3, markersize=6, linewidth=1.2, label=lab)
    for i, f in enumerate(floors):
        if i:
            ax.axvline(i - 0.5, color="0.85", linewidth=0.8)
        if f is not None and np.isfinite(f):
            ax.hlines(f, i - span / 2 - 0.05, i + span / 2 + 0.05, colors="black", linestyles="--", linewidth=1)
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="black", linestyle="--", linewidth=1))
    labels.append("oracle floor")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_xticks(range(len(columns)), columns, fontsize=9)
    ax.set_xlim(-0.6, len(columns) - 0.4)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("MAE vs MC reference (value units, 0-1)", fontsize=9)
    ax.set_xlabel("domain", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(_wrap(title, fig), fontsize=11)
    return _save(fig, path)


def calibration(panels: list[tuple[str, np.ndarray, np.ndarray]], colors: dict, title: str, path: Path,
                nbins: int = 10) -> Path:
    """Mean reference value per bin of the estimate; marker area ~ number of states in the bin."""
    fig, axes = _grid(len(panels), ncols=4, w=3.0, h=3.25, title=title + "\n(marker area ∝ states in the bin)")
    edges = np.linspace(0, 1, nbins + 1)
    for ax, (lab, est, ref) in zip(axes, panels):
        ok = np.isfinite(est) & np.isfinite(ref)
        est, ref = est[ok], ref[ok]
        b = np.clip(np.digitize(est, edges[1:-1]), 0, nbins - 1)
        cnt = np.bincount(b, minlength=nbins)
        has = cnt > 0
        mx = np.bincount(b, est, nbins)[has] / cnt[has]
        my = np.bincount(b, ref, nbins)[has] / cnt[has]
        ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=0.8, zorder=1)
        ax.plot(mx, my, color=colors.get(lab, "C0"), linewidth=0.8, alpha=0.6, zorder=2)
        ax.scatter(mx, my, s=15 + 285 * cnt[has] / max(cnt.max(), 1), color=colors.get(lab, "C0"),
                   edgecolor="white", linewidth=0.5, alpha=0.9, zorder=3, clip_on=False)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_aspect("equal")
        ax.set_title(f"{lab}  (n = {len(est)})", fontsize=10)
        ax.set_xlabel("estimate V_est (bin mean)", fontsize=9)
        ax.set_ylabel("mean reference V_ref", fontsize=9)
        ax.tick_params(labelsize=8)
    return _save(fig, path)


def error_by_position(series: list[tuple[str, np.ndarray, np.ndarray]], colors: dict, title: str, path: Path,
                      nbins: int = 5) -> Path:
    """Mean |V_est - V_ref| per bin of the state's relative position t/T."""
    fig = Figure(figsize=(7.5, 4.2), dpi=DPI)
    ax = fig.subplots()
    edges = np.linspace(0, 1, nbins + 1)
    cnt = np.zeros(nbins, int)
    for lab, pos, err in series:
        ok = np.isfinite(pos) & np.isfinite(err)
        b = np.clip(np.digitize(pos[ok], edges[1:-1]), 0, nbins - 1)
        c = np.bincount(b, minlength=nbins)
        cnt = np.maximum(cnt, c)
        m = np.where(c > 0, np.bincount(b, err[ok], nbins) / np.maximum(c, 1), np.nan)
        scale = is_scale(lab)
        ax.plot(np.arange(nbins), m, marker="s" if scale else "o", linestyle=":" if scale else "-",
                color=colors.get(lab, "C0"), label=lab, linewidth=1.5, markersize=5)
    # bins as categories, so each tick can carry how many states back the point
    ax.set_xticks(range(nbins), [f"{a:.1f}–{b:.1f}\n(n={c})" for a, b, c in zip(edges, edges[1:], cnt)], fontsize=8)
    ax.set_xlim(-0.3, nbins - 0.7)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("relative position of the state in its rollout, t / T", fontsize=9)
    ax.set_ylabel("mean |V_est − V_ref| per bin", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title(_wrap(title, fig), fontsize=11)
    return _save(fig, path)
