"""Parameter sweeps: MAE per setting of one estimator on one build (one value per axis at a time)."""

from __future__ import annotations

import itertools
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sveb.core.errors import UsageError
from sveb.estimators import grid as registry_grid
from sveb.estimators import make
from sveb.evaluate import evaluate


def default_grid(name: str) -> dict[str, list[str]]:
    """The registry's grid for an estimator; a one-line error where it has none."""
    g = registry_grid(name)
    if not g:
        raise UsageError(f"--grid: no default grid for {name}; pass --grid key=v1,v2")
    return g


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """`key=v1,v2,...` flags -> {key: [v1, v2, ...]}."""
    grid = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--grid {item}: expected key=v1,v2,...")
        k, v = item.split("=", 1)
        grid[k.strip()] = [x.strip() for x in v.split(",") if x.strip()]
    return grid


def settings(grid: dict[str, list[str]], full: bool) -> list[dict[str, str]]:
    """Every combination (full) or one axis at a time around the defaults (the cheap default)."""
    if full:
        keys = list(grid)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    return [{}] + [{k: v} for k, vs in grid.items() for v in vs]


def ablate(bdir: Path, name: str, grid: dict[str, list[str]], protocol: str, full: bool,
           console: Console) -> list[tuple[dict, dict]]:
    todo = settings(grid, full)
    for setting in todo:  # every setting is checked before the first (maybe long) run
        make(name, setting)
    out = []
    for setting in todo:
        console.print(f"{name} {setting or '(defaults)'}")
        out.append((setting, evaluate(bdir, name, setting, protocol, console=console)))
    return out


def print_ablation(name: str, results: list[tuple[dict, dict]], console: Console) -> None:
    t = Table(title=f"{name}: MAE per setting (lower is better)")
    for c in ("setting", "MAE", "95% CI", "s/state"):
        # 80 columns: labels wrap
        t.add_column(c, justify="left" if c == "setting" else "right", no_wrap=c != "setting")
    best = min(r["mae"] for _, r in results)
    for setting, r in results:
        label = " ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
        mae = f"{r['mae']:.4f}" + (" *" if r["mae"] == best else "")
        t.add_row(label, mae, f"[{r['mae_ci_low']:.3f}, {r['mae_ci_high']:.3f}]",
                  f"{r['seconds'] / max(1, r['n_states']):.4f}")
    console.print(t)
