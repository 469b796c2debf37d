"""The metric table: every number a score row, the leaderboard, the board, the site and the report show, one entry
each, and the one formatter of their cells.

The score schema (`schema.SCORES`), the leaderboard CSV, the terminal's --wide table, the site's columns, the
report's paired CSV and its per-metric tables are derived from METRICS, in its order (the leaderboard's), by
`columns(view)`. A new metric is one entry: with `compute` (estimates, references -> a float) it is computed by
the score row (sveb.score.rows), stored, and shown wherever its `views` say; the scores' version follows the
stored columns and their revisions (schema.scores_version), so stored score rows are recomputed with no other edit.
Read METRICS at call time (never copy it at import), so a table changed in a test reaches every view.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

MISSING = "–"  # the one mark of a missing or undefined value in every shown table

# views a metric can be shown in
LEADERBOARD = "leaderboard"  # leaderboard.csv (sveb leaderboard, the report's copy)
PAIRED = "paired"            # the report's paired.csv: each estimator against the baseline on the same states
SITE = "site"                # the board's static page (sveb leaderboard html)
TERMINAL = "terminal"        # the second table of `sveb leaderboard --wide`
REPORT = "report"            # a table of its own in the report: estimators as rows, builds as columns
NEIGHBOURS = "neighbours"    # the third table of `sveb leaderboard --wide`: k_eq and the neighbouring benchmarks'


@dataclass(frozen=True)
class Metric:
    name: str
    header: str                   # short header: the terminal's 80 columns
    wide: str = ""                # long header: the site and the report (the short one when empty)
    decimals: int = 3
    # fixed | p (p-value: "<0.001") | int | text | tokens (0 decimals from 10) | general (.Ng)
    style: str = "fixed"
    #                               | keq (fixed, inf as ∞; an interval open above as [low, ∞], or ">low" alone)
    signed: bool = False          # shown with its sign (+0.012)
    direction: str = ""           # lower | higher: which side is better; "" none (bias: 0 is best)
    kind: str = "state"           # state: from per-state estimates and references; reference: of the references
    #                               alone; count; paired: against the baseline, never stored; cost
    arrow: pa.DataType | None = None  # its column type in the scores table; None: not stored there
    ci: bool = False              # has NAME_ci_low and NAME_ci_high beside it
    interval: bool = False        # the site and the report show its CI as [low, high], not ± half-width
    views: frozenset = field(default_factory=frozenset)
    compute: Callable | None = None  # (est, ref) -> float over a row's states: the score row computes it
    sort_decimals: int = 6        # the site's sort key
    revision: int = 0             # bump when its computation changes: stored score rows are recomputed

    @property
    def title(self) -> str:
        return self.wide or self.header


F64, I32 = pa.float64(), pa.int32()
LB, PR, ST, TM, NB = LEADERBOARD, PAIRED, SITE, TERMINAL, NEIGHBOURS


def _v(*names: str) -> frozenset:
    return frozenset(names)


# In the leaderboard's column order; a view shows its metrics in this order.
METRICS: tuple[Metric, ...] = (
    Metric("n_states", "states", style="int", kind="count", arrow=I32, views=_v(LB, PR)),
    Metric("n_problems", "problems", style="int", kind="count", arrow=I32, views=_v(LB, PR)),
    Metric("mae", "MAE", "MAE ± 95% CI", direction="lower", arrow=F64, ci=True, views=_v(LB, PR, ST)),
    # rollout-equivalent (sveb.score.rollout_eq): the MCS@k whose expected squared error it matches; inf: no finite k
    Metric("k_eq", "k_eq", "worth k rollouts [95% CI]", decimals=1, style="keq", direction="higher", arrow=F64,
           ci=True, interval=True, views=_v(LB, ST, REPORT, NB)),
    Metric("mae_grpo", "MAE grpo", direction="lower", kind="paired", views=_v(PR)),
    Metric("delta_sq", "Δ sq err", "Δ sq err vs grpo [95% CI]", decimals=4, signed=True, direction="lower",
           kind="paired", ci=True, interval=True, views=_v(LB, PR, ST)),
    Metric("p_delta", "p", style="p", kind="paired", views=_v(LB, PR)),
    Metric("p_holm", "p", "p (Holm)", style="p", kind="paired", views=_v(LB, PR, ST)),
    Metric("delta_sq_holm_low", "Holm low", decimals=4, signed=True, kind="paired", views=_v(LB, PR)),
    Metric("delta_sq_holm_high", "Holm high", decimals=4, signed=True, kind="paired", views=_v(LB, PR)),
    Metric("verdict", "verdict", style="text", kind="paired", views=_v(LB, PR, ST)),
    Metric("family", "family", style="text", kind="paired", views=_v(LB, PR)),
    # a trained estimator's test rests on this many trainings (1: no training spread in it; sveb.score.trainings)
    Metric("trainings", "trainings", style="int", kind="paired", views=_v(LB, PR)),
    Metric("training_sd", "training sd", decimals=4, kind="paired", views=_v(LB, PR)),
    # a default row tested over trainings: its training seeds, and the sd over them of the per-training MAE (its
    # MAE and CI are then the mean over trainings: sveb.score.pooling.over_trainings_row)
    Metric("training_seeds", "training seeds", style="text", kind="paired", views=_v(LB, PR)),
    Metric("mae_training_sd", "MAE training sd", decimals=4, kind="paired", views=_v(LB, PR)),
    # a training-seed replicate (sveb.score.replicates): the estimator it replicates and its training seed; its
    # verdict is "replicate" (tested alone, unadjusted p: not a verdict of the estimator)
    Metric("replicate_of", "replicate of", style="text", kind="paired", views=_v(LB, PR)),
    Metric("training_seed", "training seed", style="int", kind="paired", views=_v(LB, PR)),
    Metric("extra_tokens_per_state", "extra tok", "extra tokens/state", style="tokens", direction="lower",
           kind="cost", views=_v(ST), sort_decimals=3),
    Metric("forward_tokens_per_state", "fwd tok", "forward tokens/state", style="tokens", direction="lower",
           kind="cost", views=_v(ST), sort_decimals=3),
    Metric("seconds_per_state", "s/state", decimals=2, style="general", direction="lower", kind="cost",
           views=_v(ST), sort_decimals=9),
    Metric("prepare_seconds", "prepare s", decimals=2, style="general", direction="lower", kind="cost",
           views=_v(ST), sort_decimals=9),
    Metric("bias", "bias", signed=True, arrow=F64, ci=True, views=_v(LB, TM)),
    Metric("calib_slope", "slope", decimals=2, arrow=F64, views=_v(LB, TM)),
    Metric("concordance", "concord", direction="higher", arrow=F64, views=_v(LB, TM)),
    Metric("sign_agreement", "sign", direction="higher", arrow=F64, views=_v(LB, TM)),
    Metric("sign_pairs", "pairs", style="int", kind="count", arrow=I32, views=_v(LB, TM)),
    # what neighbouring benchmarks read (sveb.score.ranks, calibration, choices); the corrected ones have the
    # reference's noise removed, the _raw ones are against the reference as it is
    Metric("spearman", "spearman", "Spearman (noise-corrected)", direction="higher", arrow=F64,
           views=_v(LB, ST, REPORT, NB)),
    Metric("spearman_raw", "spearman raw", direction="higher", arrow=F64, views=_v(LB)),
    Metric("spearman_within", "spearman in", "Spearman within problem (noise-corrected)", direction="higher",
           arrow=F64, views=_v(LB, NB)),
    Metric("spearman_within_raw", "spearman in raw", direction="higher", arrow=F64, views=_v(LB)),
    Metric("kendall", "kendall", "Kendall tau-b (raw)", direction="higher", arrow=F64, views=_v(LB, NB)),
    Metric("kendall_within", "kendall in", "Kendall tau-b within problem (raw)", direction="higher", arrow=F64,
           views=_v(LB)),
    Metric("ece", "ECE", "ECE (l2, noise-debiased)", direction="lower", arrow=F64,
           views=_v(LB, ST, REPORT, NB)),
    Metric("ece_raw", "ECE raw", direction="lower", arrow=F64, views=_v(LB)),
    Metric("brier", "Brier", direction="lower", arrow=F64, views=_v(LB, NB)),
    Metric("brier_reliability", "Brier rel", "Brier reliability (debiased)", decimals=4, direction="lower",
           arrow=F64, views=_v(LB)),
    Metric("brier_resolution", "Brier res", "Brier resolution (debiased)", decimals=4, direction="higher",
           arrow=F64, views=_v(LB)),
    Metric("auroc_own", "AUROC", "AUROC of the own outcome", direction="higher", arrow=F64,
           views=_v(LB, ST, REPORT, NB)),
    Metric("sibling_top1", "top-1", "sibling top-1", direction="higher", arrow=F64, views=_v(LB, REPORT, NB)),
    Metric("sibling_chance", "chance", "sibling top-1 by chance", kind="reference", arrow=F64, views=_v(LB, NB)),
    Metric("sibling_sets", "sibling sets", style="int", kind="count", arrow=I32, views=_v(LB)),
    Metric("drop_f1", "drop F1", "value-drop localisation F1", direction="higher", arrow=F64,
           views=_v(LB, REPORT, NB)),
    Metric("drop_rollouts", "drop rollouts", style="int", kind="count", arrow=I32, views=_v(LB)),
    Metric("rmse", "RMSE", direction="lower", arrow=F64, views=_v(LB)),
    Metric("debiased_mse", "debiased MSE", direction="lower", arrow=F64, views=_v(LB)),
    Metric("ref_noise", "ref noise", kind="reference", arrow=F64, views=_v(LB)),
    Metric("oracle_floor", "oracle floor", kind="reference", arrow=F64, views=_v(LB)),
    Metric("own_share", "own", "own share", direction="lower", arrow=F64, views=_v(LB, TM, ST)),
    Metric("own_shift_p95", "own p95", direction="lower", arrow=F64, views=_v(LB, TM)),
    Metric("own_shift_max", "own max", direction="lower", arrow=F64, views=_v(LB, TM)),
    Metric("seconds", "seconds", kind="cost", arrow=F64, views=_v(LB)),
)


def metric(name: str) -> Metric | None:
    """The entry of a column: a metric's own or one of its CI bounds (None for an identity column)."""
    for m in METRICS:
        if name == m.name or (m.ci and name in (f"{m.name}_ci_low", f"{m.name}_ci_high")):
            return m
    return None


def _expand(m: Metric, ci: bool = True) -> list[str]:
    return [m.name, f"{m.name}_ci_low", f"{m.name}_ci_high"] if m.ci and ci else [m.name]


def shown(view: str) -> list[Metric]:
    return [m for m in METRICS if view in m.views]


def columns(view: str) -> list[str]:
    """The metric columns of a view, CI bounds beside their metric (paired.csv: a per-state metric there is its
    mean over the paired states, without a CI)."""
    return [c for m in shown(view) for c in _expand(m, view != PAIRED or m.kind == "paired")]


def stored() -> list[tuple[str, pa.DataType]]:
    """The metric columns of the scores table and their types."""
    return [(c, m.arrow) for m in METRICS if m.arrow is not None for c in _expand(m)]


def scored() -> list[str]:
    """The columns the score row computes from per-state estimates (stored, less the costs)."""
    return [c for m in METRICS if m.arrow is not None and m.kind != "cost" for c in _expand(m)]


def paired_columns() -> list[str]:
    """The paired comparison's columns the leaderboard shows (Δ, its CIs, p, Holm, verdict, family)."""
    return [c for m in shown(LEADERBOARD) if m.kind == "paired" for c in _expand(m)]


def ok(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt(x, m: Metric | str, nd: int | None = None, signed: bool | None = None, missing: str = MISSING) -> str:
    """One cell: the value as its metric shows it (decimals, sign, p-value or token style); MISSING when absent,
    NaN or infinite. `nd`, `signed`: a table that lays a metric out differently (Table 4's paper style)."""
    if isinstance(m, str):
        m = metric(m) or Metric(m, m)
    nd = m.decimals if nd is None else nd
    signed = m.signed if signed is None else signed
    if m.style == "text":
        return str(x) if x not in (None, "") else missing
    if m.style == "keq" and isinstance(x, float) and x == math.inf:
        return "∞"
    if not ok(x):
        return missing
    if m.style == "int":
        return str(int(x))
    if m.style == "p":
        return f"<{10 ** -nd:.{nd}f}" if x < 10 ** -nd else f"{x:.{nd}f}"
    if m.style == "tokens":
        return f"{x:.0f}" if x >= 10 else f"{x:.1f}"
    if m.style == "general":
        return f"{x:.{nd}g}"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def fmt_ci(r: dict, m: Metric | str, interval: bool = False, nd: int | None = None, signed: bool | None = None) -> str:
    """A metric with its 95% CI from row r: "value ± half-width", or "value [low, high]" (`interval`); the value
    alone when the CI is undefined."""
    m = metric(m) if isinstance(m, str) else m
    x, lo, hi = r.get(m.name), r.get(f"{m.name}_ci_low"), r.get(f"{m.name}_ci_high")
    v = fmt(x, m, nd, signed)
    if m.style == "keq" and ok(lo) and isinstance(hi, float) and hi == math.inf:  # unbounded above
        return f">{fmt(lo, m, nd)}" if not ok(x) else f"{v} [{fmt(lo, m, nd)}, ∞]"
    if not ok(x) or not (ok(lo) and ok(hi)):
        return v
    if interval:
        return f"{v} [{fmt(lo, m, nd, signed)}, {fmt(hi, m, nd, signed)}]"
    return f"{v} ± {(hi - lo) / 2:.{m.decimals if nd is None else nd}f}"


def cell(r: dict, m: Metric, interval: bool = False) -> str:
    """A metric's cell in a table of rows: with its CI where it has one."""
    return fmt_ci(r, m, interval) if m.ci else fmt(r.get(m.name), m)


def csv_cell(name: str, x):
    """A CSV value: floats to 4 decimals (p-values to 4 significant digits), anything else as it is."""
    if not isinstance(x, float):
        return x
    m = metric(name)
    return f"{x:.4g}" if m is not None and m.style == "p" else f"{x:.4f}"
