"""Are the seeds a table pools replicates, and does the table hold one compute dtype? Pure numpy/scipy, no I/O.

Seeds pooled as replicates of one problem population must draw the same mix: `composition` tests level x seed
and answer type x seed (Pearson's chi-square of independence on the problems' counts; where an expected count
is below 5 the chi-square approximation fails, so its p is a Monte-Carlo permutation p of the same statistic:
the problems' labels shuffled among the seeds, seeded, (1 + #{stat* >= stat}) / (1 + n)). `seed_refusal` turns
a p < 0.01 into one line naming the seeds and their mixes. `dtype_refusal` does the same for a table whose
builds were sampled, or whose estimates computed, in more than one dtype.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from scipy.stats import chi2

P_REFUSE = 0.01   # seeds whose mix differs at this level are not pooled as replicates (issue 56)
N_PERM = 4000     # permutations where counts are small
FACTORS = ("level", "answer_type")


def chi2_stat(table: np.ndarray) -> float:
    """Pearson's X² of independence of a seeds x categories table (rows and columns with a zero total dropped)."""
    t = np.asarray(table, float)
    t = t[t.sum(1) > 0][:, t.sum(0) > 0]
    if t.shape[0] < 2 or t.shape[1] < 2:
        return 0.0
    exp = t.sum(1, keepdims=True) * t.sum(0, keepdims=True) / t.sum()
    return float(((t - exp) ** 2 / exp).sum())


def independence(labels: list[list], n_perm: int = N_PERM, seed: int = 0) -> dict:
    """Is the distribution of a label the same in every group (seed)? labels: one list per seed (one label per
    problem). Returns stat (X²), df, p and method ("chi-square", "permutation" where an expected count is < 5,
    or "one category": nothing to test, p 1)."""
    cats = sorted({str(x) for g in labels for x in g})
    table = np.array([[Counter(map(str, g))[c] for c in cats] for g in labels], float)
    kept = table[table.sum(1) > 0]
    df = (len(kept) - 1) * (len(cats) - 1)
    if len(cats) < 2 or len(kept) < 2:
        return {"stat": 0.0, "df": 0, "p": 1.0, "method": "one category"}
    stat = chi2_stat(kept)
    exp = kept.sum(1, keepdims=True) * kept.sum(0, keepdims=True) / kept.sum()
    if exp.min() >= 5:
        return {"stat": stat, "df": df, "p": float(chi2.sf(stat, df)), "method": "chi-square"}
    rng = np.random.default_rng(seed)
    codes = np.concatenate([[cats.index(str(x)) for x in g] for g in labels]).astype(int)
    sizes = [len(g) for g in labels]
    cuts = np.cumsum(sizes)[:-1]
    hits = 0
    for _ in range(n_perm):
        parts = np.split(rng.permutation(codes), cuts)
        perm = np.array([np.bincount(p, minlength=len(cats)) for p in parts], float)
        hits += chi2_stat(perm) >= stat - 1e-9
    return {"stat": stat, "df": df, "p": (1 + hits) / (1 + n_perm), "method": "permutation"}


def composition(seeds: list, problems: list[list[dict]], factors=FACTORS) -> list[dict]:
    """One row per factor: the test of `independence` over the seeds' problems (dicts with the factor's value;
    a missing one counts as "?"), and each seed's mix as "seed S: value×count, ..."."""
    out = []
    for f in factors:
        labels = [[p.get(f) if p.get(f) is not None else "?" for p in ps] for ps in problems]
        res = independence(labels)
        mix = "; ".join(f"seed {s}: " + ", ".join(f"{k}×{n}" for k, n in sorted(Counter(map(str, ls)).items()))
                        for s, ls in zip(seeds, labels))
        out.append({"factor": f, **res, "mix": mix})
    return out


def seed_refusal(what: str, rows: list[dict], alpha: float = P_REFUSE) -> str | None:
    """One line when a factor's mix differs between the seeds (p < alpha), else None."""
    bad = [r for r in rows if r["p"] < alpha]
    if not bad:
        return None
    return (f"{what}: the seeds are not replicates: " + "; ".join(
        f"{r['factor']} x seed p {r['p']:.2g} ({r['method']}; {r['mix']})" for r in bad))


def dtype_refusal(what: str, dtypes: dict[str, str | None]) -> str | None:
    """One line when the table's parts (name -> dtype; None: not recorded, left out) hold more than one dtype."""
    known = {k: v for k, v in dtypes.items() if v}
    if len(set(known.values())) < 2:
        return None
    by: dict[str, list[str]] = {}
    for k, v in known.items():
        by.setdefault(v, []).append(k)
    return f"{what}: mixed dtypes: " + "; ".join(f"{v}: {', '.join(ks)}" for v, ks in sorted(by.items()))
