"""pyarrow schemas of every table. Bump SCHEMA_VERSION when a table changes meaning."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2
# Bumped when the scores computed from stored estimates change (new columns): evaluate recomputes score rows
# (from the stored estimates, without rerunning the estimator) while builds keep their fingerprints.
SCORES_VERSION = 3

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

SCORES = pa.schema([
    ("model", pa.string()),
    ("domain", pa.string()),
    ("build_fp", pa.string()),
    ("estimator", pa.string()),
    ("params_fp", pa.string()),
    ("params", pa.string()),
    ("protocol", pa.string()),
    ("n_states", pa.int32()),
    ("n_problems", pa.int32()),
    ("mae", pa.float64()),
    ("mae_ci_low", pa.float64()),
    ("mae_ci_high", pa.float64()),
    ("rmse", pa.float64()),
    ("debiased_mse", pa.float64()),
    ("ref_noise", pa.float64()),     # E|V - reference| under the fitted prior (not a bound)
    ("oracle_floor", pa.float64()),  # E MAE of the best predictor that knows V (a bound in expectation)
    ("own_share", pa.float64()),     # mean |change| of the estimate when the state's own reward flips
    ("seconds", pa.float64()),
    ("bias", pa.float64()),          # mean of estimate - reference, with its clustered CI
    ("bias_ci_low", pa.float64()),
    ("bias_ci_high", pa.float64()),
    ("calib_slope", pa.float64()),   # OLS slope of the reference on the estimate (1: calibrated)
    ("concordance", pa.float64()),   # within-problem pairwise ranking agreement (ties 1/2)
    ("sign_agreement", pa.float64()),  # step advantage sign agreement on same-rollout pairs
    ("sign_pairs", pa.int32()),      # same-rollout pairs it rests on (0: NaN)
    ("own_shift_p95", pa.float64()),
    ("own_shift_max", pa.float64()),
])
