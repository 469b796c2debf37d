"""Where SVEB cuts a group's rollouts into states (seeded per problem by the caller): single cuts, or pairs
t1 < t2 of one rollout. The authors' cut (at a space of the first rollout) is sveb/sample/paper.py's."""

from __future__ import annotations

import random


def single_cuts(rng: random.Random, usable: list[dict], n: int):
    """n distinct (rollout, t) cuts: a rollout uniformly, t uniform in [1, T-1]."""
    seen: set[tuple[int, int]] = set()
    for _ in range(n * 20):
        if len(seen) == n or not usable:
            return
        r = rng.choice(usable)
        t = rng.randint(1, len(r["response_token_ids"]) - 1)
        if (r["rollout_idx"], t) not in seen:
            seen.add((r["rollout_idx"], t))
            yield r, t


def pair_cuts(rng: random.Random, usable: list[dict], n: int):
    """n // 2 pairs of cuts t1 < t2 of one rollout each (for step-advantage sign agreement: sign(V(s2) - V(s1))
    is what an advantage uses), distinct rollouts while there are enough; an odd n adds one single cut."""
    pool = [r for r in usable if len(r["response_token_ids"]) >= 3]  # two distinct cuts in [1, T-1]
    order = rng.sample(pool, len(pool))
    for k in range(min(n // 2, len(order))):
        r = order[k]
        t1, t2 = sorted(rng.sample(range(1, len(r["response_token_ids"])), 2))
        yield r, t1
        yield r, t2
    if n % 2:
        yield from single_cuts(rng, usable, 1)
