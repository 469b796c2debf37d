"""The collapse, measured: how far an estimator's values move from GRPO's group mean (paper Fig. 2, App. C).

For every stored (estimator, params_fp, protocol) other than grpo, its per-state values are paired
with grpo's under the same protocol; V_est - V_grpo is summarised (mean, std, fraction within
+-0.05) and drawn as a histogram.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from sveb import store
from sveb.core import schema
from sveb.core.errors import UsageError
from sveb.estimators import BASELINE

TOL = 0.05


def collapse_stats(v_est: np.ndarray, v_grpo: np.ndarray, tol: float = TOL) -> dict:
    """Summary of d = v_est - v_grpo: n, mean, std, frac_within (|d| <= tol), mean_abs, tol."""
    d = np.asarray(v_est, dtype=np.float64) - np.asarray(v_grpo, dtype=np.float64)
    if d.size == 0:
        return {"n": 0, "mean": float("nan"), "std": float("nan"), "frac_within": float("nan"),
                "mean_abs": float("nan"), "tol": tol}
    return {"n": int(d.size), "mean": float(d.mean()), "std": float(d.std()),
            "frac_within": float((np.abs(d) <= tol + 1e-12).mean()), "mean_abs": float(np.abs(d).mean()), "tol": tol}


def plot_collapse(diffs_by_label: dict[str, np.ndarray], out_png: Path, title: str) -> Path:
    """Overlaid histograms of V_est - V_grpo, one per label, on shared bins."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in diffs_by_label.items()}
    everything = np.concatenate([a for a in arrays.values() if a.size] or [np.zeros(1)])
    lim = max(0.5, float(np.abs(everything).max()) * 1.05)
    bins = np.linspace(-lim, lim, 41)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, a in arrays.items():
        s = collapse_stats(a, np.zeros_like(a))
        ax.hist(a, bins=bins, histtype="stepfilled", alpha=0.45,
                label=f"{label} (n={s['n']}, mean={s['mean']:+.3f}, sd={s['std']:.3f}, "
                      f"{100 * s['frac_within']:.0f}% within ±{TOL})")
    ax.axvspan(-TOL, TOL, color="grey", alpha=0.12, lw=0)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_xlabel("V_est − V_grpo")
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    out_png = Path(out_png)
    store.atomic_write_bytes(out_png, buf.getvalue())
    return out_png


def collapse_report(bdir: Path, out_dir: Path) -> list[Path]:
    """Stats JSON + histogram PNG per non-grpo (estimator, params_fp, protocol) of a build; their paths."""
    rows = store.read_table(Path(bdir) / "estimates", schema.ESTIMATES).to_pylist()
    if not rows:
        raise UsageError(f"{bdir}: no estimates; run `sveb eval` first")
    runs: dict[tuple[str, str, str], dict] = {}
    for r in rows:
        run = runs.setdefault((r["estimator"], r["params_fp"], r["protocol"]), {"params": r["params"], "values": {}})
        run["values"][r["state_id"]] = r["value"]
    grpo = {proto: run["values"] for (est, _, proto), run in runs.items() if est == BASELINE}
    manifest = store.load_manifest(Path(bdir))
    out_dir, paths, missing = Path(out_dir), [], set()
    for (est, pfp, proto), run in sorted(runs.items()):
        if est == BASELINE:
            continue
        if proto not in grpo:
            missing.add(proto)
            continue
        ids = sorted(set(run["values"]) & set(grpo[proto]))
        v = np.array([run["values"][i] for i in ids])
        g = np.array([grpo[proto][i] for i in ids])
        stats = {"estimator": est, "params_fp": pfp, "params": json.loads(run["params"]), "protocol": proto,
                 "model": manifest.model, "domain": manifest.domain, "build_fp": manifest.build_fp,
                 **collapse_stats(v, g)}
        stem = f"collapse-{est}-{pfp}-{proto}"
        json_path = out_dir / f"{stem}.json"
        store.atomic_write_bytes(json_path, json.dumps(stats, indent=2).encode())
        title = f"{est} − {BASELINE} ({proto}), {manifest.model} / {manifest.domain}"
        paths += [json_path, plot_collapse({est: v - g}, out_dir / f"{stem}.png", title)]
    if not paths and missing:
        raise UsageError(f"{bdir}: no {BASELINE} estimates under protocol {', '.join(sorted(missing))}; "
                         f"run `sveb eval -e {BASELINE} --protocol <p>` first")
    return paths
