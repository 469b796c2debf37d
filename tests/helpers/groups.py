"""Problem groups with planted hidden states, and a stand-in for a build an estimator prepares on."""

import numpy as np

from sveb.core.manifest import Manifest
from sveb.estimators.base import ProblemGroup, Rollout


def group_with_hidden(G=8, T=12, d=6, seed=0):
    """Correct rollouts' hidden states sit near +e0 at the anchor (the token before '\\boxed'), incorrect
    ones near -e0; character-level 'tokens', so the anchor index is the marker's character index."""
    rng = np.random.default_rng(seed)
    rolls, hidden = [], {}
    for i in range(G):
        ok = i % 2 == 0
        text = "x" * (T - 8) + "\\boxed{" + ("1" if ok else "2")
        ids = tuple(ord(c) for c in text)
        h = rng.normal(scale=0.1, size=(len(ids), d))
        h[:, 0] += 1.0 if ok else -1.0
        rolls.append(Rollout(i, (1, 2), ids, text, 1.0 if ok else 0.0))
        hidden[i] = h.astype(np.float32)
    return ProblemGroup({"problem_id": "p"}, tuple(rolls), tuple(rolls), hidden.__getitem__)


class FakeBuild:
    """What `prepare` reads of a build: its folder and a manifest naming a model that is not there."""

    def __init__(self, tmp_path):
        self.bdir = tmp_path / "m" / "number" / "b"
        self.bdir.mkdir(parents=True)
        self.manifest = Manifest({"model": str(tmp_path / "no-model"), "domain": "number"})
