"""The dataset card (README.md) of an export: a YAML header Hugging Face `datasets` reads (one config per table),
then what a reader must know to trust the numbers: model and weights hash, sampling, sources and licences,
counts, truncation and the SVEB version."""

from __future__ import annotations

import pyarrow as pa
import yaml

from sveb.core.config import BuildConfig
from sveb.data_builders.load import paper_source, registry

# Licence names as the sources state them -> the hub's licence ids.
HUB_LICENCES = {"MIT": "mit", "CC BY 4.0": "cc-by-4.0", "CC BY-SA 4.0": "cc-by-sa-4.0", "Apache-2.0": "apache-2.0"}
ABOUT = {
    "problems": "the kept problems: question, gold answer, answer type, tests (code), meta (JSON)",
    "rollouts": "G rollouts per problem: prompt and response token ids, response text, reward, finish reason, seed",
    "states": "states cut from rollouts: the first t response tokens of rollout rollout_idx (of T)",
    "references": "per state: mc_rewards (the n_ref draws whose mean is the reference value), extra_rewards "
                  "(independent draws for the MCS@k baselines), finish_reasons (of the n_ref then the extra draws)",
    "screens": "the screening rollouts the difficulty filter decided on (estimators never see them)",
}


def source_licence(source: str, domain: str) -> tuple[str, str]:
    """(what the source is, its licence) for a build's --source."""
    if source == "builtin":
        return "builtin generator of SVEB (procedural problems)", "same as SVEB"
    reg = registry()
    name = source.split("=", 1)[0]
    src = reg.get(name) or (paper_source(domain) if name == "hub" else None)
    if src is None:
        return f"local file {source}", "unknown: see the file's origin"
    return f"{src.name}: {src.hub_label()}", src.licence


def _share(x) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{x:.1%}"


def counts(tables: dict[str, pa.Table]) -> dict[str, float | int]:
    """Counts and shares a reader checks first, from the tables themselves."""
    refs = tables["references"].to_pylist()
    rolls = tables["rollouts"]
    kept = set(tables["problems"].column("problem_id").to_pylist())
    rewards = [r for p, r in zip(rolls.column("problem_id").to_pylist(), rolls.column("reward").to_pylist())
               if p in kept]
    return {"problems": len(kept), "rollouts": len(rewards), "states": tables["states"].num_rows,
            "reference draws per state": int(refs[0]["n_ref"]) if refs else 0,
            "extra draws per state": len(refs[0]["extra_rewards"]) if refs else 0,
            "rollout accuracy": round(sum(rewards) / len(rewards), 4) if rewards else float("nan")}


def card(manifest: dict, tables: dict[str, pa.Table]) -> str:
    cfg, ex = BuildConfig.from_manifest(manifest), manifest["export"]
    split = cfg.split
    what, licence = source_licence(cfg.source, manifest["domain"])
    header = {
        "pretty_name": f"SVEB build: {manifest['domain']} / {manifest['model']} ({manifest['build_fp'][:12]})",
        "license": HUB_LICENCES.get(licence, "other"),
        "tags": ["sveb", "value-estimation", "monte-carlo", "rollouts"],
        "configs": [{"config_name": t, "data_files": [{"split": split, "path": f"{t}/*.parquet"}]}
                    | ({"default": True} if t == "references" else {}) for t in tables],
    }
    c = counts(tables)
    tr = manifest.get("truncated") or {}
    samp = cfg.sampling
    lines = [
        "---", yaml.safe_dump(header, sort_keys=False).strip(), "---", "",
        f"# SVEB build: {manifest['domain']}, {manifest['model']}", "",
        "Rollouts, states and Monte-Carlo reference values of one SVEB build, frozen: score any state-value "
        "estimator on it without sampling (`sveb eval --build THIS_FOLDER -e NAME`).", "",
        "## Provenance",
        f"- model: `{manifest['model']}`; sha256 of its weight files: `{ex['model_weights_sha256']}` "
        "(hidden-state estimators recompute hidden states from these weights and refuse others)",
        f"- sampling: temperature {samp.temperature}, top_p {samp.top_p}, max_tokens "
        f"{samp.max_tokens}, dtype {manifest.get('dtype')}, engine {cfg.engine}, seed {cfg.seed}",
        f"- build: G={cfg.rollouts} rollouts per problem, {cfg.states_per_problem} states per problem, "
        f"difficulty filter [{cfg.min_acc}, {cfg.max_acc}] on {cfg.screen} screening rollouts, "
        f"split {split}; build fingerprint `{manifest['build_fp']}`",
        f"- source: {what}; licence: {licence}",
        f"- SVEB version {ex['sveb_version']}; content hash `{ex['content_hash']}`", "",
        "## Counts",
        *[f"- {k}: {v}" for k, v in c.items()],
        f"- cut off by the token budget: {_share(tr.get('rollouts'))} of rollouts, "
        f"{_share(tr.get('references'))} of reference continuations", "",
        "## Tables (one config each)",
        "| config | rows | sha256 of its rows | contents |", "|---|--:|---|---|",
        *[f"| {t} | {ex['tables'][t]['rows']} | `{ex['tables'][t]['sha256'][:16]}` | {ABOUT.get(t, '')} |"
          for t in tables], "",
        "Each hash is sveb.store.table_hash: sha256 of the rows as canonical JSON in key order (so it does not "
        "depend on how the rows are sharded). `sveb eval --build` refuses a folder whose tables differ.", "",
        "## Load",
        "```python",
        "import datasets, pandas",
        f'refs = datasets.load_dataset("THIS_FOLDER", "references", split="{split}")',
        'states = pandas.read_parquet("THIS_FOLDER/states")',
        "```", "",
    ]
    return "\n".join(lines)
