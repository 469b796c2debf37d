"""`sveb conformance DIR`: cases with the outputs of the authors' code, run through SVEB's estimators.

A directory in the format of ../shared/conformance/FORMAT.md holds any of `numca.jsonl`, `hista/cases.jsonl`
(with one .npz per Hista group beside it) and `pacs.jsonl` (also looked for in `pacs/`). Numca and Hista cases
go through the estimators' own `estimate` on a group built from the case (the in-group protocol: the own
rollout is a member); PACS cases through the training kernel the estimator trains with. A case agrees when
every value is within 1e-6 (PACS's psi within 1e-9 relative).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from sveb.core.errors import UsageError
from sveb.core.records import GroupHidden
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.numca import Numca

TOL = 1e-6
PSI_RTOL = 1e-9


@dataclass
class Outcome:
    estimator: str
    case_id: str
    rules: list[str]
    ok: bool
    detail: str = ""


@dataclass
class Tally:
    agree: Counter = field(default_factory=Counter)
    total: Counter = field(default_factory=Counter)


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{path}:{n}: not a JSON object ({e.msg})") from None
            if not isinstance(case, dict):
                raise UsageError(f"{path}:{n}: not a JSON object")
            yield n, case


def _need(case: dict, key: str, path: Path, n: int):
    if key not in case:
        raise UsageError(f"{path}:{n}: case {case.get('id', '?')} has no field '{key}'")
    return case[key]


def numca_case(case: dict, path: Path, n: int) -> tuple[float, float]:
    group = _need(case, "group", path, n)
    own, cut = int(_need(case, "own", path, n)), int(_need(case, "cut_chars", path, n))
    rolls = tuple(Rollout(i, (), (), str(g["text"]), float(g["reward"])) for i, g in enumerate(group))
    text = rolls[own].response_text
    # a cut past the end reads like a cut at the end (the authors' loop stops at the last character)
    state = State(str(case.get("id", n)), "p", own, min(cut, len(text)), text[:cut])
    value = Numca(clip=False).estimate(ProblemGroup({}, rolls), [state])[0]
    return float(value), float(_need(case, "expected", path, n))


def hista_case(case: dict, root: Path, path: Path, n: int, groups: dict) -> tuple[float, float]:
    from sveb.estimators.hista import Hista  # torch
    rel = _need(case, "group", path, n)
    npz = root / rel  # relative to the conformance directory (FORMAT.md)
    if rel not in groups:
        if not npz.is_file():
            raise UsageError(f"{path}:{n}: case {case.get('id')}: group file {npz} not found")
        with np.load(npz) as z:
            groups[rel] = {k: z[k] for k in z.files}
    z = groups[rel]
    count = len(z["rewards"])
    resp = {j: z[f"response_{j}"].astype(np.float32) for j in range(count)}
    prompt = z["prompt"].astype(np.float32)
    start = int(_need(case, "start_token_index", path, n))
    hidden = GroupHidden(resp, lambda: prompt, lambda: start)
    rolls = tuple(Rollout(j, (), (), "", float(z["rewards"][j])) for j in range(count))
    p = _need(case, "params", path, n)
    est = Hista(alpha=float(p["alpha"]), mean_window=int(p["mean_window"]), node_interval=int(p["node_interval"]),
                max_k=int(p["max_k"]), min_k=int(p["min_k"]), min_distance=float(p["min_distance"]), t=float(p["t"]))
    own = int(_need(case, "own", path, n))
    state = State(str(case.get("id", n)), "p", own, int(_need(case, "cut_tokens", path, n)), "")
    value = est.raw_estimate(ProblemGroup({}, rolls, hidden_fn=hidden), [state])[0]
    return float(value), float(_need(case, "expected", path, n))


def pacs_case(case: dict, path: Path, n: int) -> tuple[bool, str]:
    from sveb.estimators.pacs_loss import run_case  # scipy
    got = run_case(case)
    exp = _need(case, "expected", path, n)
    psi, e_psi = np.asarray(got["psi"], float), np.asarray(exp["psi"], float)
    grad, e_grad = np.asarray(got["grad_log_ratio_sum"], float), np.asarray(exp["grad_log_ratio_sum"], float)
    worst_psi = float(np.max(np.abs(psi - e_psi) / np.maximum(np.abs(e_psi), 1e-300))) if len(psi) else 0.0
    ok = (psi.shape == e_psi.shape and grad.shape == e_grad.shape and worst_psi <= PSI_RTOL
          and abs(got["loss"] - exp["loss"]) <= TOL and bool(np.all(np.abs(grad - e_grad) <= TOL)))
    return ok, f"loss {got['loss']:.9g} vs {exp['loss']:.9g}"


def run_dir(root: Path, progress: Callable[[str], None] | None = None) -> list[Outcome]:
    """Every case of a conformance directory, in file order."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"conformance: {root} is not a directory")
    files = {"numca": root / "numca.jsonl", "hista": root / "hista" / "cases.jsonl",
             "pacs": next((p for p in (root / "pacs.jsonl", root / "pacs" / "pacs.jsonl") if p.is_file()),
                          root / "pacs.jsonl")}
    if not any(p.is_file() for p in files.values()):
        raise UsageError(f"conformance: {root} holds none of numca.jsonl, hista/cases.jsonl, pacs.jsonl, "
                         f"pacs/pacs.jsonl (see FORMAT.md)")
    out: list[Outcome] = []
    groups: dict = {}
    for name, path in files.items():
        if not path.is_file():
            continue
        if progress:
            progress(f"{name}: {path}")
        for n, case in _read_jsonl(path):
            rules = [str(r) for r in case.get("rules", [])]
            cid = str(case.get("id", f"{path.name}:{n}"))
            if name == "pacs":
                ok, detail = pacs_case(case, path, n)
            else:
                got, want = numca_case(case, path, n) if name == "numca" else hista_case(case, root, path, n, groups)
                ok, detail = abs(got - want) <= TOL, f"{got:.9g} vs expected {want:.9g}"
            out.append(Outcome(name, cid, rules + (["ties"] if case.get("ties") and "ties" not in rules else []),
                               ok, detail))
    return out


def tally(outcomes: list[Outcome]) -> dict[str, Tally]:
    """Per estimator: agreeing and total cases per rule tag (and "all")."""
    res: dict[str, Tally] = {}
    for o in outcomes:
        t = res.setdefault(o.estimator, Tally())
        for tag in ["all", *o.rules]:
            t.total[tag] += 1
            t.agree[tag] += o.ok
    return res
