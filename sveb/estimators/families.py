"""Holm families, declared rather than inferred from what a table happens to hold or what is installed.

- main: the builtin estimators (registry role "estimator", not a variant) at their default settings;
- scale: the MCS@k rows at their defaults;
- scale-variant: the cheaper Monte-Carlo forms at the same k (`mcs-eb-k`, `mcs-cv-k`: sveb/estimators/mcs_shrink.py);
- variant: SVEB's earlier readings of papers' estimators (`numca-sveb`, ...) at their defaults.
- external: estimators that read a model other than the policy's value machinery (judge, prm) at their defaults;
- intrinsic: the policy's own signals at a prefix (logprob, entropy, intrinsic) at their defaults: cheap baselines
  whose verdicts are read among themselves, so they neither dilute the main family's Holm correction nor borrow
  from it.
A reference-scale estimator (`reads_references`: it reads the evaluated build's extra draws) is in a scale family
(scale, scale-variant) and in no other; a registry that declares otherwise is an error here.
Each family's size is its declared membership: a member not scored in a table counts as p = 1, so a verdict
never depends on how many estimators someone scored. Anything else (a non-default setting, a training-seed
replicate, a plugin) is tested alone (a family of one) and labelled "alone".

The defaults are stored in defaults.json (written by `python -m sveb.estimators.families`, checked by
tests/test_families.py): reading a row's family needs no estimator import, so it is the same without torch.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from sveb.estimators import BUILTIN, make, params_json

DEFAULTS_FILE = Path(__file__).with_name("defaults.json")
FAMILIES = ("main", "scale", "variant", "external", "intrinsic", "scale-variant")
SCALE = ("scale", "scale-variant")  # the families a reference-scale row may be in
ALONE = "alone"


def declared_members() -> dict[str, tuple[str, ...]]:
    """family -> the builtin estimator names in it (registry order)."""
    out: dict[str, list[str]] = {f: [] for f in FAMILIES}
    for e in BUILTIN:
        if e.role == "scale" or e.reads_references:  # the references' readers: a scale family, no other
            fam = e.family or "scale"
            if e.role != "scale" or fam not in SCALE:
                raise ValueError(f"estimator {e.name}: a reference-scale estimator has role scale and a family in "
                                 f"{', '.join(SCALE)}, not role {e.role}, family {fam}")
            out[fam].append(e.name)
        elif e.family:
            out[e.family].append(e.name)
        elif e.variant:
            out["variant"].append(e.name)
        elif e.role == "estimator":
            out["main"].append(e.name)
    return {f: tuple(v) for f, v in out.items()}


def compute_defaults() -> dict[str, dict]:
    """Each builtin estimator's default parameters (imports every estimator: torch included)."""
    return {e.name: json.loads(params_json(make(e.name))) for e in BUILTIN if e.role != "baseline"}


@lru_cache(maxsize=1)
def defaults() -> dict[str, dict]:
    return json.loads(DEFAULTS_FILE.read_text())


def _params(pj) -> dict | None:
    if isinstance(pj, dict):
        return pj
    try:
        return json.loads(pj or "{}")
    except (TypeError, json.JSONDecodeError):
        return None


def current_name(name: str, params_json=None) -> str:
    """The registry name a stored row's reading has today. A row stored before SVEB's earlier reading of X was
    renamed `X-sveb` carries the name X with that reading's settings (parameters added since then absent, the
    rest at that reading's defaults): it is `X-sveb`. Every table, plot and board labels rows by this name.
    `params_json` None or "" (settings unknown, e.g. a published table's rows): the name as it is."""
    d = defaults()
    old = d.get(f"{name}-sveb")
    p = _params(params_json) if params_json not in (None, "") else None
    if p is None or old is None or p == d.get(name):
        return name
    return f"{name}-sveb" if set(p) <= set(old) and {**old, **p} == old else name


def family_of(name: str, params_json=None) -> str:
    """The declared family of a row, or "alone". `params_json` None: the row is taken at its default.
    A row stored under a name its reading no longer has (current_name) is in its current name's family."""
    fam = next((f for f, members in declared_members().items() if name in members), None)
    if fam is None:
        return ALONE
    if params_json is None:
        return fam
    if _params(params_json) == defaults().get(name):
        return fam
    now = current_name(name, params_json)
    return family_of(now) if now != name else ALONE


def family_size(fam: str) -> int:
    """How many comparisons Holm corrects for in a family: its declared members (1 when alone)."""
    return len(declared_members().get(fam, ())) or 1


if __name__ == "__main__":
    DEFAULTS_FILE.write_text(json.dumps(compute_defaults(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DEFAULTS_FILE}")
