"""Which views a report shows: a root's builds with scores, pooled where they differ only in their seed, sorted in
the paper's domain order; the notes on builds it skips; which ablation settings it hides."""

from __future__ import annotations

from pathlib import Path

from sveb import store
from sveb.core import metrics
from sveb.core.errors import SvebError
from sveb.data_builders import DOMAINS
from sveb.estimators.families import current_name
from sveb.evaluate.protocols import PROTOCOLS
from sveb.present import leaderboard
from sveb.score import pooling
from sveb.score.paper_rows import ref_rows
from sveb.score.pooling import View


class ReportError(SvebError, RuntimeError):
    pass


def sorted_protocols(protos) -> list[str]:
    return sorted(protos, key=lambda p: (PROTOCOLS.index(p) if p in PROTOCOLS else len(PROTOCOLS), p))


def collect_views(root: Path, only: set | None = None, allow: pooling.Allow = pooling.Allow()
             ) -> tuple[list[View], list[list[View]], list[str]]:
    """The views the tables show (a pooled view per group of seeds, else the build) sorted, the groups of
    seeds behind each pooled view, and notes. Mixed seeds or dtypes are refused unless `allow` (pooling.pools)."""
    builds = [b for b in store.list_builds(root) if only is None or b.name in only]
    if not builds:
        from sveb.store.builds import frozen_hint
        raise ReportError(f"{root}: no builds found (run `sveb build` first{frozen_hint(None)})")
    views, notes = [], []
    for bdir in builds:
        try:
            scores = pooling.read_scores(bdir) if (bdir / "scores").exists() else []
            views += [pooling.load_view(bdir, scores)] if scores else []
            notes += [] if scores else [f"build {bdir.relative_to(root)}: no scores yet (run `sveb eval`); skipped"]
        except store.StoreError as e:
            notes.append(f"build {bdir.relative_to(root)}: unreadable ({e}); skipped")
    if not views:
        unreadable = [n for n in notes if ": unreadable (" in n]
        raise ReportError(f"{root}: {unreadable[0]}" if unreadable else
                          f"{root}: none of the {len(builds)} builds has scores; run `sveb eval` on a build first")
    groups = pooling.pools(views, allow)
    shown = [pooling.merge(g) for g in groups]
    for v in shown:  # a model with two builds (or pools) of one domain gets one column per build
        twins = sum(w.model == v.model and w.domain == v.domain for w in shown)
        v.col = v.domain if twins == 1 else f"{v.domain} ({v.fp[:8]})"
        if leaderboard.build_protocol(v) == "paper":  # the authors' protocol: said on its column, their MCS@k rows
            v.col += " [paper protocol]"
            v.scores = v.scores + ref_rows(v, sorted({r["protocol"] for r in v.scores}))
    return sorted(shown, key=view_order), [g for g in groups if len(g) > 1], notes


def view_order(v: View) -> tuple:  # paper order of domains (Table 4), unknown ones last
    return (v.model, DOMAINS.index(v.domain) if v.domain in DOMAINS else len(DOMAINS), v.col)


def protocols_of(v: View) -> list[str]:
    return sorted_protocols({k[2] for k in v.est} | {r["protocol"] for r in v.scores})


def truncated_shares(bdir: Path) -> list[str]:
    """Shares of rollouts and reference draws cut off by the token budget (manifest of the build)."""
    tr = store.load_manifest(bdir).truncated
    return [f"{tr[k]:.1%}" if isinstance(tr.get(k), (int, float)) else metrics.MISSING
            for k in ("rollouts", "references")]


def drop_variants(views: list[View], labels: dict) -> None:
    """Hide non-default settings (ablations) of an estimator whose default setting is also in the build."""
    for v in views:
        now = {k: current_name(k[0], pj) for k, pj in v.params.items()}  # a row stored under an old name: today's
        has_default = {now[k] for k in v.params if labels[k] == now[k]}

        def shown(n: str, pfp: str, now=now, has_default=has_default) -> bool:  # this view's
            name = now.get((n, pfp), n)
            return labels.get((n, pfp), name) == name or name not in has_default
        v.scores = [r for r in v.scores if shown(r["estimator"], r["params_fp"])]
        v.est = {k: a for k, a in v.est.items() if shown(k[0], k[1])}
        v.params = {k: pj for k, pj in v.params.items() if shown(*k)}
