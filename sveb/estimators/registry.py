"""The estimator registry: one entry per estimator carries everything the rest of SVEB reads about it.

Modules are imported only when an estimator is built. Three ways in:
- the entries below (SVEB's own);
- the entry-point group `sveb.estimators` of any installed package: `name = "pkg.module:Class"`;
  the class declares its capabilities (`description`, `role`, `grid`, `needs_hidden`, `needs_training`,
  `train_split`: sveb.estimators.base), as SVEB's own classes do;
- `--estimator pkg.module:Class` for a class that is registered nowhere.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sveb.core.errors import UsageError, brief

ROLES = ("baseline", "estimator", "scale")  # scale: shown for scale (MCS@k), never "best"
GROUP = "sveb.estimators"


@dataclass(frozen=True)
class Entry:
    """A registered name. The capabilities (description .. constructed) are the class's declaration
    (sveb.estimators.base.Estimator); a builtin entry sets one only where a name differs from its class's default
    (two names on one class: shear-sveb, probe-mc, pacs-sveb, mcs-k). None: the class's."""
    name: str
    target: str                             # "module:Class"
    description: str | None = None
    role: str | None = None
    preset: dict = field(default_factory=dict)   # parameters fixed by the name (mcs-2: k=2)
    grid: dict | None = None                # default `sveb ablate` grid {param: [values]}
    needs_hidden: bool | None = None        # reads hidden states (a forward pass over every rollout)
    needs_training: bool | None = None      # trains a model before estimating
    train_split: bool | None = None         # trains on a disjoint `--split train` build
    constructed: bool | None = None         # its V(s) is SVEB's construction from a paper that defines none
    reads_references: bool | None = None    # handed the evaluated build's extra draws (reference scale only)
    reads_tokens: bool | None = None        # reads the policy's token ids (refused on a text-only build)
    loads_model: bool | None = None         # runs a language model (the policy or another) itself
    origin: str = "sveb"                    # sveb | the plugin's distribution | "import path"
    variant: bool = False                   # SVEB's earlier reading of a paper's estimator, kept for comparison:
    #                                         not run by default, a Holm family of its own
    family: str = ""                        # a Holm family of its own (external: another model; intrinsic: the
    #                                         policy's own signals): not run by default, the main family stays as is

    def completed(self, caps: dict) -> Entry:
        """This entry with every capability it leaves to its class filled in from `caps`."""
        return dataclasses.replace(self, **{k: v for k, v in caps.items() if getattr(self, k) is None})

    def load(self) -> type:
        module, _, cls = self.target.partition(":")
        if self.origin == "import path":
            _cwd_on_path()
        try:
            return getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as e:
            raise UnknownEstimator(f"estimator '{self.name}': cannot load {self.target} ({brief(e)})") from None


def _cwd_on_path() -> None:
    """`-e my_module:Class` from the module's own folder: the `sveb` script's path holds its bin folder, not the
    current directory (as `python -m` would); the current directory goes last, so it shadows no installed module."""
    import os
    import sys
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.append(cwd)


class UnknownEstimator(UsageError):
    pass


_MCS = "mean of {k} independent continuation{s} of the state (MCS@{k}, for scale; needs --mc-extra {k})"
_EB = ("MCS@{k} shrunk toward the held-out group mean: beta-binomial posterior mean, the prior's concentration "
       "fitted per build on the other problems (reference scale; needs --mc-extra {k})")
_CV = ("MCS@{k} plus a fitted multiple of a zero-mean control from the group (reference scale; needs "
       "--mc-extra {k})")
# SVEB's own, in registry order: a name, its class, and only what the name changes of the class's declaration
DECLARED: tuple[Entry, ...] = (
    Entry("grpo", "sveb.estimators.grpo:GroupMean"),
    *(Entry(f"mcs-{k}", "sveb.estimators.mcs:MonteCarlo", _MCS.format(k=k, s="s" * (k > 1)), preset={"k": k})
      for k in (1, 2, 3, 4)),
    *(Entry(f"mcs-{form}-{k}", f"sveb.estimators.mcs_shrink:{cls}", about.format(k=k), preset={"k": k},
            family="scale-variant")
      for form, cls, about in (("eb", "MonteCarloShrunk", _EB), ("cv", "MonteCarloCV", _CV)) for k in (1, 2, 3, 4)),
    Entry("numca", "sveb.estimators.numca:Numca"),
    Entry("numca-sveb", "sveb.estimators.numca_sveb:NumcaSVEB", variant=True),
    Entry("hista", "sveb.estimators.hista:Hista"),
    Entry("hista-sveb", "sveb.estimators.hista_sveb:HistaSVEB", variant=True),
    Entry("shear", "sveb.estimators.shear:Shear"),
    Entry("shear-sveb", "sveb.estimators.shear:Shear",
          "SVEB's construction from SHEAR's signal, SVEB's earlier variant (SHEAR defines no V(s)): 1/d-weighted mean "
          "reward of the rollouts, d = min Wasserstein distance of the state's trailing window to each rollout's spans",
          variant=True, preset={"tail": "full", "span": "trailing", "compare": "all", "minimum": "rollout",
                                "readout": "knn"},
          grid={"w": ["25", "50", "100"], "s": ["10", "25"], "eps": ["0.01", "0.05", "0.2"]}),
    Entry("hidden-align", "sveb.estimators.hidden_align:HiddenAlign"),
    Entry("ppo-1", "sveb.estimators.ppo:PPO1"),
    Entry("pacs", "sveb.estimators.pacs:PACS"),
    Entry("pacs-sveb", "sveb.estimators.pacs:PACS",
          "SVEB's construction from PACS's signal, SVEB's earlier variant (PACS defines no V(s)): unweighted loss, "
          "log-probs at T = 1, the same-length baseline at a rollout's end", grid={}, variant=True,
          preset={"weight": "none", "logprob_temperature": 1.0, "final_baseline": "truncated"}),
    Entry("probe", "sveb.estimators.probe:Probe", preset={"regime": "outcome"}),
    Entry("probe-mc", "sveb.estimators.probe:Probe",
          "logistic value probe on the policy's hidden states, entropy, t and the group's mean, trained on "
          "a disjoint problem set (labels: the train build's Monte-Carlo references)", preset={"regime": "mc"}),
    Entry("ppo-n", "sveb.estimators.ppo:PPON"),
    Entry("judge", "sveb.estimators.judge:Judge", family="external"),
    Entry("judge-cal", "sveb.estimators.judge:Judge",
          "judge's P(yes) through a logistic map of its log-odds fitted on the train build's states and references "
          "(the judge's signal on the value's scale)", preset={"readout": "calibrated"}, family="external"),
    Entry("prm", "sveb.estimators.prm:PRM", family="external"),
    Entry("logprob", "sveb.estimators.intrinsic:LogProb", family="intrinsic"),
    Entry("entropy", "sveb.estimators.intrinsic:Entropy", family="intrinsic"),
    Entry("intrinsic", "sveb.estimators.intrinsic:Intrinsic", family="intrinsic"),
)


CAPABILITIES_FILE = Path(__file__).with_name("capabilities.json")  # written by sveb.estimators.capabilities
DEFAULT_CAPS = {"description": "", "role": "estimator", "grid": {}, "needs_hidden": False, "needs_training": False,
                "train_split": False, "constructed": False, "reads_references": False,
                "reads_tokens": False, "loads_model": False}  # a class not in the file yet (while it is written)


def _builtin() -> tuple[Entry, ...]:
    """The declared entries completed from their classes' capabilities (capabilities.json: no estimator import)."""
    caps = json.loads(CAPABILITIES_FILE.read_text()) if CAPABILITIES_FILE.exists() else {}
    return tuple(e.completed({**DEFAULT_CAPS, **caps.get(e.target, {})}) for e in DECLARED)


BUILTIN: tuple[Entry, ...] = _builtin()

_PLUGINS: dict[str, Entry] | None = None


def _plugins() -> dict[str, Entry]:
    """Entries from installed packages (group `sveb.estimators`), read once per process."""
    global _PLUGINS
    if _PLUGINS is None:
        from importlib.metadata import entry_points
        _PLUGINS = {}
        for ep in entry_points(group=GROUP):
            dist = getattr(ep, "dist", None)
            _PLUGINS.setdefault(ep.name, Entry(ep.name, ep.value, origin=dist.name if dist else "plugin"))
    return _PLUGINS


def entries() -> dict[str, Entry]:
    """Every registered estimator, SVEB's first (a plugin cannot shadow one of them)."""
    own = {e.name: e for e in BUILTIN}
    return {**own, **{k: e for k, e in _plugins().items() if k not in own}}


def _with_class_info(e: Entry) -> Entry:
    """A plugin entry completed from its class's capabilities (`description`, `role`, `grid`, `needs_hidden`,
    `needs_training`, `train_split`, `constructed`: sveb.estimators.base.Estimator)."""
    if e.origin == "sveb":
        return e
    from sveb.estimators.base import capabilities_of  # numpy: registry lookups stay light
    caps = capabilities_of(e.load())
    if caps["role"] not in ROLES:
        raise UsageError(f"estimator '{e.name}' ({e.target}): role '{caps['role']}' is not one of {', '.join(ROLES)}")
    if caps["reads_references"] and caps["role"] != "scale":  # the references are a scale row's alone
        raise UsageError(f"estimator '{e.name}' ({e.target}): reads_references = True needs role 'scale' (a "
                         f"reference-scale estimator, shown for scale and tested in no estimator family), not "
                         f"'{caps['role']}'")
    _SEEN[e.name] = caps["role"]  # an import path's role, for the tables this process writes (role_of)
    return e.completed(caps)


_SEEN: dict[str, str] = {}  # name -> role of the plugins and import paths resolved in this process


def entry(name: str) -> Entry:
    """The entry of a name, a plugin's or an import path `module:Class`; one-line error otherwise."""
    known = entries()
    if name in known:
        return _with_class_info(known[name])
    if re.fullmatch(r"[\w.]+:\w+", name):
        return _with_class_info(Entry(name, name, origin="import path"))
    near = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(known)}"
    raise UnknownEstimator(f"unknown estimator '{name}'{hint} (or pass module:Class)")


def names(role: str | None = None, variants: bool = False, extra: bool = False) -> list[str]:
    """Registered SVEB estimators (in registry order), optionally of one role; SVEB's earlier variants
    (`numca-sveb`, ...) only with `variants`; those in a family of their own (judge, prm, logprob, ...) only
    with `extra`."""
    return [e.name for e in BUILTIN if (role is None or e.role == role) and (variants or not e.variant)
            and (extra or not e.family)]


def is_variant(name: str) -> bool:
    return any(e.name == name and e.variant for e in BUILTIN)


BASELINE = next((e.name for e in BUILTIN if e.role == "baseline"), "grpo")  # what every estimator is paired against
CONSTRUCTED = tuple(e.name for e in BUILTIN if e.constructed)  # their V(s) is SVEB's, not their papers'


def role_of(name: str) -> str:
    """The role of a stored estimator name (unknown names, e.g. an uninstalled plugin's, are estimators)."""
    own = {e.name: e for e in BUILTIN}
    if name in own:
        return own[name].role
    if name in _SEEN:  # resolved in this process
        return _SEEN[name]
    if _local_import_path(name):  # `-e my_module:Class` scored earlier from this folder: its class says
        try:
            return _with_class_info(Entry(name, name, origin="import path")).role
        except Exception:  # a broken or changed file: unlabelled, never a crash of the report reading it
            return "estimator"
    e = _plugins().get(name)
    try:
        return _with_class_info(e).role if e else "estimator"
    except UsageError:
        return "estimator"


def _local_import_path(name: str) -> bool:
    """Whether a stored name is an import path `module:Class` whose module is a file in the current folder (the
    user's own, as `-e my_module:Class` found it). Only such a module is imported to read its class's role: a
    name from a table or a bundle never imports a module from anywhere else."""
    if not re.fullmatch(r"\w+:\w+", name):
        return False
    here, module = Path.cwd(), name.split(":")[0]
    return (here / f"{module}.py").is_file() or (here / module / "__init__.py").is_file()


def rank(name: str) -> tuple[int, int]:
    """Sort key for tables: baseline, estimators, then the scale rows; registry order within a role."""
    order = {e.name: i for i, e in enumerate(BUILTIN)}
    return ROLES.index(role_of(name)), order.get(name, len(order))


def grid(name: str) -> dict[str, list[str]]:
    return {k: [str(v) for v in vs] for k, vs in entry(name).grid.items()}
