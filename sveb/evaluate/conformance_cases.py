"""The fields of one conformance case (../shared/conformance/FORMAT.md), checked before anything is computed.

Each check raises `Bad` with what is wrong with which field (`"own" must be an index into "group" (0..5), got 7`);
`conformance.run_dir` prefixes the file, line and case id and aborts the run with that one line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from sveb.core.errors import brief

MISSING = object()
HISTA_PARAMS = ("alpha", "mean_window", "node_interval", "max_k", "min_k", "min_distance", "t")


class Bad(Exception):
    """One field of a case (or its .npz group) that breaks FORMAT.md; run_dir adds the file, line and case id."""


def shown(value) -> str:
    """A field's value as JSON, on one line and at most 40 characters."""
    try:
        s = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(value)
    s = " ".join(s.split())
    return s if len(s) <= 40 else s[:37] + "..."


def must(key: str, what: str, value=MISSING) -> Bad:
    if value is MISSING:
        return Bad(f'has no field "{key}" ({what})')
    return Bad(f'"{key}" must be {what}, got {shown(value)}')


def _get(d: dict, key: str, label: str, what: str):
    if key not in d:
        raise must(label, what)
    return d[key]


def integer(d: dict, key: str, lo: int | None = None, hi: int | None = None, label: str | None = None,
            what: str | None = None) -> int:
    """An int (not a bool, not 0.9) in [lo, hi]."""
    label = label or key
    what = what or ("an integer" + (f" in [{lo}, {hi}]" if lo is not None and hi is not None
                                    else f" >= {lo}" if lo is not None else ""))
    v = _get(d, key, label, what)
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise must(label, what, v)
    return v


def number(d: dict, key: str, label: str | None = None, what: str = "a finite number", ok=lambda x: True) -> float:
    """A finite int or float (not a bool, not NaN) that passes `ok`."""
    label = label or key
    v = _get(d, key, label, what)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
        raise must(label, what, v)
    return float(v)


def a_list(d: dict, key: str, what: str, min_len: int = 0, label: str | None = None) -> list:
    label = label or key
    v = _get(d, key, label, what)
    if not isinstance(v, list) or len(v) < min_len:
        raise must(label, what, v)
    return v


def numbers(d: dict, key: str, length: int | None = None, min_len: int = 0, binary: bool = False,
            label: str | None = None) -> list[float]:
    """A list of finite numbers (0.0 / 1.0 only if `binary`) of `length` items (at least `min_len`)."""
    label = label or key
    what = (f"a list of {length}" if length is not None else f"a list of at least {min_len}") + \
        (" rewards 0.0 / 1.0" if binary else " finite numbers")
    v = a_list(d, key, what, min_len, label)
    if length is not None and len(v) != length:
        raise Bad(f'"{label}" must be {what} (one per rollout), got {len(v)} items')
    for i, x in enumerate(v):
        if (isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                or (binary and x not in (0, 1))):
            raise must(f"{label}[{i}]", "0.0 or 1.0" if binary else "a finite number", x)
    return [float(x) for x in v]


def common(case: dict, required: tuple[str, ...]) -> None:
    """Every required field present, and the tags `rules` (optional) a list of strings."""
    missing = [k for k in required if k not in case]
    if missing:
        raise Bad("has no field " + ", ".join(f'"{k}"' for k in missing) + " (FORMAT.md)")
    if not isinstance(case["id"], str) or not case["id"]:
        raise must("id", "a non-empty string", case["id"])
    rules = case.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise must("rules", "a list of strings", rules)


def check_numca(case: dict) -> tuple[list[tuple[str, float]], int, int, float]:
    """(group as (text, reward), own, cut_chars, expected) of a numca.jsonl case."""
    common(case, ("id", "group", "own", "cut_chars", "expected"))
    group = a_list(case, "group", "a non-empty list of {text, reward}", 1)
    members = []
    for i, g in enumerate(group):
        if not isinstance(g, dict):
            raise must(f"group[{i}]", "an object {text, reward}", g)
        text = _get(g, "text", f"group[{i}].text", "a string")
        if not isinstance(text, str):
            raise must(f"group[{i}].text", "a string", text)
        members.append((text, number(g, "reward", f"group[{i}].reward", "0.0 or 1.0 (binarized)",
                                     lambda x: x in (0, 1))))
    own = integer(case, "own", 0, len(group) - 1, what=f'an index into "group" (0..{len(group) - 1})')
    cut = integer(case, "cut_chars", 0)
    return members, own, cut, number(case, "expected")


def check_hista(case: dict) -> tuple[str, dict, float]:
    """(group file, params, expected) of a hista/cases.jsonl case; own, cut_tokens and start_token_index are
    checked against the group's arrays by `check_hista_cut`."""
    common(case, ("id", "group", "own", "cut_tokens", "start_token_index", "params", "expected"))
    rel = case["group"]
    if not isinstance(rel, str) or not rel:
        raise must("group", "the path of an .npz file (relative to the directory)", rel)
    if "ties" in case and not isinstance(case["ties"], bool):
        raise must("ties", "true or false", case["ties"])
    p = case["params"]
    if not isinstance(p, dict):
        raise must("params", "an object {" + ", ".join(HISTA_PARAMS) + "}", p)
    missing = [k for k in HISTA_PARAMS if k not in p]
    if missing:
        raise Bad('"params" has no field ' + ", ".join(f'"{k}"' for k in missing) + " (FORMAT.md)")
    params = {"alpha": number(p, "alpha", "params.alpha", "a number in [0, 1)", lambda x: 0 <= x < 1)}
    for k in ("mean_window", "node_interval", "max_k"):
        params[k] = integer(p, k, 1, label=f"params.{k}")
    params["min_k"] = integer(p, "min_k", 1, params["max_k"], label="params.min_k",
                              what=f"an integer in [1, max_k={params['max_k']}]")
    for k in ("min_distance", "t"):
        params[k] = number(p, k, f"params.{k}", "a number > 0", lambda x: x > 0)
    return rel, params, number(case, "expected")


def load_group(npz: Path) -> dict[str, np.ndarray]:
    """A Hista group's arrays, checked: `rewards` (G, 0/1), `prompt` (P x H, P >= 1), `response_<j>` (T_j x H)."""
    if not npz.is_file():
        raise Bad(f"group file {npz} not found")
    try:
        with np.load(npz) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # a truncated zip, a member that does not decompress, pickled objects, ...
        raise Bad(f"group file {npz} is not a readable .npz ({type(e).__name__}: {brief(e)})") from e

    def array(key: str, what: str) -> np.ndarray:
        if key not in arrays:
            raise Bad(f'group file {npz} has no array "{key}" ({what})')
        a = arrays[key]
        if a.dtype.kind not in "fiub":
            raise Bad(f'group file {npz}: "{key}" must be numeric ({what}), got dtype {a.dtype}')
        return a

    rewards = array("rewards", "the rollouts' rewards")
    if rewards.ndim != 1 or len(rewards) < 1 or not np.all(np.isin(rewards, (0, 1))):
        raise Bad(f'group file {npz}: "rewards" must be a 1-D array of 0.0 / 1.0, got shape {rewards.shape}'
                  + ("" if rewards.ndim != 1 else f" with values {shown(rewards.tolist())}"))
    prompt = array("prompt", "P x H hidden states")
    if prompt.ndim != 2 or prompt.shape[0] < 1:
        raise Bad(f'group file {npz}: "prompt" must be P x H with P >= 1, got shape {prompt.shape}')
    for j in range(len(rewards)):
        r = array(f"response_{j}", f"rollout {j}'s T x H hidden states; one per reward")
        if r.ndim != 2 or r.shape[1] != prompt.shape[1]:
            raise Bad(f'group file {npz}: "response_{j}" must be T x {prompt.shape[1]} (the prompt\'s width), '
                      f"got shape {r.shape}")
    return arrays


def check_hista_cut(case: dict, arrays: dict[str, np.ndarray]) -> tuple[int, int, int]:
    """(own, cut_tokens, start_token_index), checked against the group's arrays."""
    count, plen = len(arrays["rewards"]), len(arrays["prompt"])
    own = integer(case, "own", 0, count - 1, what=f"an index into the group's {count} rollouts (0..{count - 1})")
    length = len(arrays[f"response_{own}"])
    cut = integer(case, "cut_tokens", 0, length, what=f"an integer in [0, {length}] (rollout {own}'s tokens)")
    start = integer(case, "start_token_index", 0, plen - 1,
                    what=f"a token index in the prompt (0..{plen - 1})")
    return own, cut, start


def check_pacs(case: dict) -> dict:
    """A pacs.jsonl case, checked; the same dict (run_case reads it)."""
    common(case, ("id", "beta", "use_weight", "log_ratio_sum", "rewards", "expected"))
    number(case, "beta")
    if not isinstance(case["use_weight"], bool):
        raise must("use_weight", "true or false", case["use_weight"])
    g = len(numbers(case, "log_ratio_sum", min_len=2))
    numbers(case, "rewards", length=g, binary=True)
    exp = case["expected"]
    if not isinstance(exp, dict):
        raise must("expected", "an object {psi, loss, grad_log_ratio_sum}", exp)
    numbers(exp, "psi", length=g, label="expected.psi")
    number(exp, "loss", "expected.loss")
    numbers(exp, "grad_log_ratio_sum", length=g, label="expected.grad_log_ratio_sum")
    return case
