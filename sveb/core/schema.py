"""pyarrow schemas of every table. Bump SCHEMA_VERSION when a table changes meaning."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from sveb.core import metrics

SCHEMA_VERSION = 2
# The scores' version (SCORES_VERSION, computed when read) is derived from the metric table: when the stored score
# columns or a metric's revision change, evaluate recomputes score rows (from the stored estimates, without rerunning
# the estimator) while builds keep their fingerprints. The table as it stood at the last hand-kept version (4: k_eq
# and the neighbouring benchmarks' metrics, issue 57) keeps that number, so the score rows stored then stay current.
KEPT_VERSIONS = {"3ba69a2ee8197e34": 4}

PROBLEMS = pa.schema([
    ("problem_id", pa.string()),
    ("domain", pa.string()),
    ("source", pa.string()),
    ("question", pa.string()),
    ("answer", pa.string()),
    ("answer_type", pa.string()),   # math | choice | string | code
    ("tests", pa.string()),         # JSON list of test cases (code only), else ""
    ("meta", pa.string()),          # JSON object
])

ROLLOUTS = pa.schema([
    ("problem_id", pa.string()),
    ("rollout_idx", pa.int32()),
    ("prompt_token_ids", pa.list_(pa.int32())),
    ("response_token_ids", pa.list_(pa.int32())),
    ("response_text", pa.string()),
    ("reward", pa.float32()),
    ("finish_reason", pa.string()),
    ("seed", pa.int64()),
])

STATES = pa.schema([
    ("state_id", pa.string()),
    ("problem_id", pa.string()),
    ("rollout_idx", pa.int32()),
    ("t", pa.int32()),               # response tokens in the prefix
    ("T", pa.int32()),               # response tokens of the whole rollout
    ("prefix_text", pa.string()),
])

REFERENCES = pa.schema([
    ("state_id", pa.string()),
    ("mc_rewards", pa.list_(pa.float32())),     # the n_ref reference draws
    ("value", pa.float64()),                    # mean of mc_rewards
    ("n_ref", pa.int32()),
    ("extra_rewards", pa.list_(pa.float32())),  # independent draws for MCS@k baselines
    ("finish_reasons", pa.list_(pa.string())),  # stop | length, of the n_ref draws then the extra ones
])

ESTIMATES = pa.schema([
    ("state_id", pa.string()),
    ("problem_id", pa.string()),
    ("estimator", pa.string()),
    ("params_fp", pa.string()),
    ("params", pa.string()),         # JSON of the resolved parameters
    ("protocol", pa.string()),
    ("value", pa.float64()),
    ("own_shift", pa.float64()),     # |change| of value when the state's own reward flips (NaN: not measured)
])

# The identity of a score row; its metric columns come from the metric table (sveb.core.metrics), so SCORES is
# computed when read (a metric added to the table is a new column).
SCORE_IDENTITY = [("model", pa.string()), ("domain", pa.string()), ("build_fp", pa.string()),
                  ("estimator", pa.string()), ("params_fp", pa.string()), ("params", pa.string()),
                  ("protocol", pa.string())]


def scores_schema() -> pa.Schema:
    return pa.schema(SCORE_IDENTITY + metrics.stored())


def scores_version() -> int | str:
    """A hash of the scores table's metric columns (name, type; order aside) and the metrics' revisions."""
    parts = sorted([c, str(t)] for c, t in metrics.stored())
    parts += [[m.name, "revision", m.revision] for m in metrics.METRICS if m.revision]
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return KEPT_VERSIONS.get(digest, digest)


def __getattr__(name: str):
    if name == "SCORES":
        return scores_schema()
    if name == "SCORES_VERSION":
        return scores_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
