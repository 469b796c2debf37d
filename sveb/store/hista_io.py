"""`sveb import --format hista-json` and `sveb export --format hista-json`: the Hista/Numca authors' generated SVEB JSON
(sveb.store.hista_json) read into a frozen build folder, and any build written as such a file.

The imported folder is an export (sveb.store.export): one Parquet file per table, their hashes and the content hash in
manifest.json, a dataset card; `sveb eval --build DIR` checks and scores it like any export. Its manifest says what
differs: the format, the source file's sha256, the model ("unknown" unless given), t in characters, and which
estimators and rows are unavailable (no token ids, no hidden states, no individual reference draws).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from sveb import store
from sveb.core import schema
from sveb.data_builders import DOMAINS
from sveb.data_builders.files import json_why
from sveb.data_builders.hista import domain_of_verifier
from sveb.store.builds import load_build
from sveb.store.export import sveb_version
from sveb.store.hista_json import (
    DEFAULT_N_REF,
    FORMAT,
    NOISE_TABLE,
    T_UNIT,
    TOKEN_LEVEL,
    UNAVAILABLE,
    HistaJsonError,
    check_records,
    from_tables,
    to_tables,
)

SCHEMAS = {"problems": schema.PROBLEMS, "rollouts": schema.ROLLOUTS, "states": schema.STATES,
           "references": schema.REFERENCES,
           NOISE_TABLE: pa.schema([("state_id", pa.string()), ("noise", pa.list_(pa.float64()))])}
NOTE = (f"t and T count characters of the response (no tokenizer was run: no token ids are stored); the reference is "
        f"the file's unbiased_state_value with its declared n (the length of unbiased_state_value_noise, else "
        f"{DEFAULT_N_REF}); the individual draws are unknown, so MCS@k and {TOKEN_LEVEL} are {UNAVAILABLE}")


def read_records(path: Path) -> tuple[list[dict], str]:
    """The checked records of a file and its sha256; a one-line error naming the record and field otherwise."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise HistaJsonError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        doc = json.loads(data.decode("utf-8-sig"))  # a byte-order mark (Windows editors) is not an error
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested too deeply, a number of 4300+ digits
        raise HistaJsonError(f"{path}: not a JSON file ({json_why(e)})") from None
    try:
        return check_records(doc), hashlib.sha256(data).hexdigest()
    except HistaJsonError as e:
        raise HistaJsonError(f"{path}: {e}") from None


def _domain(records: list[dict], domain: str | None) -> str:
    if domain is not None:
        if domain not in DOMAINS:
            raise HistaJsonError(f"--domain {domain}: unknown (known: {', '.join(DOMAINS)})")
        return domain
    return Counter(domain_of_verifier(r["verifier"]) for r in records).most_common(1)[0][0]


def _card(manifest: dict) -> str:
    ex = manifest["export"]
    header = {"pretty_name": f"SVEB import of {ex['source_file']} ({FORMAT})", "license": "other",
              "tags": ["sveb", "value-estimation", "monte-carlo", "rollouts", FORMAT],
              "configs": [{"config_name": t, "data_files": [{"split": "test", "path": f"{t}/*.parquet"}]}
                          | ({"default": True} if t == "references" else {}) for t in ex["tables"]]}
    s = manifest["hista_json"]
    lines = ["---", yaml.safe_dump(header, sort_keys=False).strip(), "---", "",
             f"# SVEB build imported from {ex['source_file']} ({FORMAT})", "",
             "The Hista/Numca authors' generated SVEB JSON (github.com/VOXXXX1874/Hista), read into SVEB's tables: "
             "`sveb eval --build THIS_FOLDER -e grpo -e numca`.", "",
             f"- source file sha256: `{ex['source_sha256']}`; model: `{manifest['model']}`; domain: "
             f"{manifest['domain']}; content hash `{ex['content_hash']}`",
             f"- {s['n_problems']} problems, {s['n_states']} states, group sizes {s['group_sizes']}, reference n "
             f"{s['n_ref']}, rollout accuracy {s['rollout_accuracy']}",
             f"- {NOTE}", "",
             "| config | rows | sha256 of its rows |", "|---|--:|---|",
             *[f"| {t} | {v['rows']} | `{v['sha256'][:16]}` |" for t, v in ex["tables"].items()], ""]
    return "\n".join(lines)


def import_hista_json(path: Path, out: Path, model: str | None = None, domain: str | None = None) -> Path:
    """Read the authors' file `path` into the new folder `out`; every record is checked first, so a malformed
    file writes nothing."""
    path, out = Path(path), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HistaJsonError(f"--out {out}: exists and is not empty; pass a new folder")
    records, sha = read_records(path)
    domain = _domain(records, domain)
    rows, summary = to_tables(records, domain)
    sizes = summary["group_sizes"]
    with store.staged_dir(out) as tmp:  # the folder appears whole or not at all
        info = {}
        for name, sch in SCHEMAS.items():
            (tmp / name).mkdir()
            pq.write_table(pa.Table.from_pylist(rows[name], schema=sch), store.shard_path(tmp / name, 0),
                           compression="zstd")
            info[name] = {"sha256": store.table_hash(tmp / name), "rows": len(rows[name])}
        export = {"format": FORMAT, "source_file": path.name, "source_sha256": sha, "tables": info,
                  "content_hash": store.content_hash(tmp), "model_weights_sha256": None, "sveb_version": sveb_version(),
                  "source_build": None, "t_unit": T_UNIT, "note": NOTE}
        manifest = {
            "build_fp": sha[:12], "model": model or "unknown", "domain": domain, "status": "complete",
            "n_problems": summary["n_problems"], "n_states": summary["n_states"], "dtype": None,
            "config": {"split": "test", "source": f"{FORMAT}={path.name}", "rollouts": sizes[0] if len(sizes) == 1
                       else None, "mc": summary["n_ref"][0] if len(summary["n_ref"]) == 1 else None, "mc_extra": 0},
            "truncated": {"rollouts": None, "references": None}, "export": export, "hista_json": summary}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        (tmp / "README.md").write_text(_card(manifest))
    return out


def export_hista_json(bdir: Path, out: Path) -> tuple[Path, int, int]:
    """Write the build (or export folder) `bdir` as the authors' file `out` (new): one record per state. Returns the
    path, the records written and how many prefixes were cut back to a character boundary."""
    bdir, out = Path(bdir), Path(out)
    if not store.complete(bdir):
        raise HistaJsonError(f"{bdir}: the build is not complete; rerun its `sveb build` first")
    if out.exists():
        raise HistaJsonError(f"--out {out}: exists; pass a new file")
    data = load_build(bdir)  # an export's tables are checked against their hashes here
    noise = None
    if (bdir / NOISE_TABLE).is_dir():  # an imported file's own noise MAEs (it has no draws to compute them from)
        noise = {r["state_id"]: r["noise"] for r in store.read_table(bdir / NOISE_TABLE).to_pylist()}
    records, recut = from_tables(data.problems, data.rollouts, data.states, data.references, noise)
    store.atomic_write_bytes(out, json.dumps(records, ensure_ascii=False).encode("utf-8"))
    return out, len(records), recut
