"""Seeds as a stratified partition of a source, so that the seeds of one config are replicates by construction.

Within each stratum of a split (a builtin generator's level; a dataset's declared level/subject/type field, else one
stratum) the problems are ranked by a keyed hash of (domain, source, split, problem id, stratum) and dealt to slots
in turn: rank r goes to slot r mod S. Seed s draws from slot s only, so seeds are disjoint whatever they ask, and a
problem's seed depends on the source alone, never on how many candidates a build asks for. A seed asks each stratum
for its share of n (Webster's apportionment of the strata's weights: house-monotone, so a larger n keeps every
smaller n's problems) and takes that many of its slot in a seeded order. A slot too small for its share, or a seed
beyond the S slots, is an error naming what to ask instead: a seed is never filled with another seed's problems.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Callable
from typing import Any

from sveb.core.errors import UsageError

# Slots a split is dealt into: the test split holds the benchmark's seeds (at least 6 replicates, two spare); the
# train split fewer, larger ones (a train build is bigger than a benchmark seed, and two or three are enough).
SLOTS = {"test": 8, "train": 4}
SLOT_MIN = 150      # a dataset split of fewer than SLOTS x SLOT_MIN problems gets fewer slots: each holds >= 150
POOL_CAP = 2400     # a builtin level is the first POOL_CAP distinct problems of its own stream (or all it yields)
# What the problems fingerprint keeps of this rule (sveb.sample.rules.stage_fps): a build drawn by an earlier rule
# (sequential exclusion, 2026-11-26; each seed on its own before) is never reused for a draw of this one.
DRAW = "stratified slots 1"


def _h(*parts: Any) -> int:
    return int(hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:16], 16)


def allocate(n: int, weights: dict[Any, float]) -> dict[Any, int]:
    """n seats over the strata in proportion to their weights (Webster / Sainte-Lague: each next seat goes to the
    stratum of largest w / (2k + 1); ties to the earlier stratum). House-monotone: no count drops as n grows."""
    labels = [lv for lv, w in weights.items() if w > 0]
    if n > 0 and not labels:
        raise ValueError("no stratum has a positive weight")
    got = dict.fromkeys(labels, 0)
    heap = [(-weights[lv], i, lv) for i, lv in enumerate(labels)]
    heapq.heapify(heap)
    for _ in range(n):
        _, i, lv = heapq.heappop(heap)
        got[lv] += 1
        heapq.heappush(heap, (-weights[lv] / (2 * got[lv] + 1), i, lv))
    return got


def slot_of(problems: list[dict], key: tuple, label: Any, slots: int) -> dict[str, int]:
    """problem id -> slot, for one stratum's problems: ranked by the keyed hash, dealt in turn."""
    ranked = sorted((p["problem_id"] for p in problems), key=lambda pid: (_h(*key, pid, label), pid))
    return {pid: r % slots for r, pid in enumerate(ranked)}


def dataset_slots(split: str, size: int) -> int:
    """Slots of a dataset split of `size` problems: the split's SLOTS, fewer where a slot would hold < SLOT_MIN.
    A split under 2 x SLOT_MIN is one slot: too small for replicates, every seed draws from all of it (seeds
    overlap; load_problems says so). The size, never a build's n, decides."""
    return max(1, min(SLOTS.get(split, SLOTS["test"]), size // SLOT_MIN))


def check_seed(seed: int, slots: int, where: str, split: str) -> None:
    if not 0 <= seed < slots:
        which = "only seed 0" if slots == 1 else f"seeds 0-{slots - 1}"
        raise UsageError(f"--seed {seed}: {where} deals its {split} problems into {slots} disjoint seed slot"
                         f"{'s' if slots > 1 else ''}, so it has {which}; use one of them (a larger source has more)")


def partition_draw(strata: dict[Any, list[dict]], weights: dict[Any, float], n: int, seed: int, key: tuple,
                   slots: int, where: str, ask: str | None = None, name: str = "level", exclude=None) -> list[dict]:
    """Seed `seed`'s n problems: each stratum's share of n (by `weights`) from the seed's slot of it, in the seed's
    order. key = (domain, source, split); `where` and `ask` (how n was made) name the source and the request in
    the one-line errors. `exclude` (sveb.data_builders.exclude.Exclusion, or any container of problems): left out
    of the seed's slot after the dealing, so the other seeds' problems and order do not move."""
    split = key[2]
    if slots > 1:  # a one-slot source (a small dataset: see dataset_slots) has no disjoint seeds to check
        check_seed(seed, slots, where, split)
    order = lambda p: (_h(*key, "order", seed, p["problem_id"]), p["problem_id"])  # noqa: E731
    out: list[dict] = []
    for label, k in allocate(n, weights).items():
        if k == 0:
            continue
        slot = slot_of(strata[label], key, label, slots)
        mine = sorted((p for p in strata[label] if slot[p["problem_id"]] == seed % slots), key=order)
        gone = 0
        if exclude:
            kept = [p for p in mine if p not in exclude]
            gone, mine = len(mine) - len(kept), kept
        if len(mine) < k:
            of = f" of {name} {label}" if len(strata) > 1 else ""
            after = f" once --exclude removed {gone}" if gone else ""
            raise UsageError(
                f"--seed {seed}: {where} (domain {key[0]}) holds {len(mine)} {split} problems{of} in "
                f"this seed's slot{after}, {k} needed for {ask or f'{n} candidates'} (its {split} problems are "
                f"dealt into {slots} disjoint seeds within each {name}); ask for fewer candidates (--problems x "
                f"--oversample) "
                f"or use a larger source")
        out += mine[:k]
    return sorted(out, key=order)


LEVEL_POOLS: dict[tuple, dict[int, list[dict]]] = {}


def level_pools(domain: str, levels: dict[int, float], make: Callable[[int, random.Random], dict],
                cap: int = POOL_CAP) -> dict[int, list[dict]]:
    """Each level's source: the first `cap` distinct problems of its own stream (random.Random of domain and level),
    or every one the stream yields before 10 x found + 1,000 draws bring nothing new. A problem an earlier level
    already holds is left out of later ones. Built once per process."""
    k = (domain, tuple(sorted(levels)), cap)
    if k not in LEVEL_POOLS:
        seen: set[str] = set()
        pools = {}
        for lv in sorted(levels):
            rng, out, tries, last = random.Random(f"{domain}-level-{lv}"), [], 0, 0
            while len(out) < cap and tries - last <= 10 * len(out) + 1_000:
                tries += 1
                p = make(lv, rng)
                if p["problem_id"] not in seen:
                    seen.add(p["problem_id"])
                    out.append(p)
                    last = tries
            pools[lv] = out
        LEVEL_POOLS[k] = pools
    return LEVEL_POOLS[k]
