"""`sveb conformance DIR`: cases with the outputs of the authors' code, run through SVEB's estimators.

A directory in the format of ../shared/conformance/FORMAT.md holds any of `numca.jsonl`, `hista/cases.jsonl`
(with one .npz per Hista group beside it) and `pacs.jsonl` (also looked for in `pacs/`). Numca and Hista cases
go through the estimators' own `estimate` on a group built from the case (the in-group protocol: the own
rollout is a member); PACS cases through the training kernel the estimator trains with. A case agrees when
every value is within 1e-6 (PACS's psi within 1e-9 relative).

Bad input aborts the run: every field of a case is checked (types, ranges, lengths, required keys per FORMAT.md;
conformance_cases) before it is computed, and a bad case, a line that is not UTF-8 JSON, a Hista group file that
is missing or unreadable, or anything else that fails while one case is read or computed stops the run with one
line naming the file, line and case id (`error: DIR/numca.jsonl:3: case X: "own" must be an index into "group"
(0..5), got 7`; exit code 1). A case file without any case is an error too (it would check nothing). Only a case
that computes and gives another value is reported as disagreeing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sveb.core.errors import SvebError, UsageError, brief
from sveb.core.records import GroupHidden
from sveb.data_builders.files import json_why
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.numca import Numca
from sveb.evaluate.conformance_cases import (
    Bad,
    check_hista,
    check_hista_cut,
    check_numca,
    check_pacs,
    load_group,
)

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
    """(line number, case) of each non-blank line; an error when a line is not UTF-8 JSON or no line is a case."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:
        raise UsageError(f"conformance: cannot read {path}: {e.strerror or type(e).__name__}") from None
    seen = 0
    for n, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UsageError(f"{path}:{n}: not UTF-8 text (byte 0x{raw[e.start]:02x} at byte {e.start + 1} "
                             f"of the line)") from None
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}:{n}: not a JSON object ({e.msg})") from None
        except RecursionError:
            raise UsageError(f"{path}:{n}: not a JSON object (nested too deeply)") from None
        except ValueError as e:  # after JSONDecodeError, its subclass: int() refusing a too long number
            raise UsageError(f"{path}:{n}: not a JSON object ({json_why(e)})") from None
        if not isinstance(case, dict):
            raise UsageError(f"{path}:{n}: not a JSON object")
        seen += 1
        yield n, case
    if not seen:
        raise UsageError(f"conformance: no cases were found in {path} (an empty case file checks nothing)")


@contextmanager
def _at(path: Path, n: int, case: dict):
    """Any failure while one case is checked or computed -> one line naming the file, line and case id."""
    cid = case.get("id")
    where = f"{path}:{n}: case {cid}" if isinstance(cid, str) and cid else f"{path}:{n}"
    try:
        yield
    except (Bad, SvebError) as e:
        raise UsageError(f"{where}: {e}") from e
    except Exception as e:  # a case FORMAT.md's checks let through: still one line, never a traceback
        msg = brief(e) if str(e).strip() else ""
        raise UsageError(f"{where}: cannot be computed ({type(e).__name__}{': ' + msg if msg else ''})") from e


def numca_case(case: dict, path: Path, n: int) -> tuple[float, float]:
    with _at(path, n, case):
        members, own, cut, expected = check_numca(case)
        rolls = tuple(Rollout(i, (), (), text, reward) for i, (text, reward) in enumerate(members))
        text = rolls[own].response_text
        # a cut past the end reads like a cut at the end (the authors' loop stops at the last character)
        state = State(case["id"], "p", own, min(cut, len(text)), text[:cut])
        value = Numca(clip=False).estimate(ProblemGroup({}, rolls), [state])[0]
        return float(value), expected


def hista_case(case: dict, root: Path, path: Path, n: int, groups: dict) -> tuple[float, float]:
    from sveb.estimators.hista import Hista  # torch
    with _at(path, n, case):
        rel, params, expected = check_hista(case)
        if rel not in groups:
            groups[rel] = load_group(root / rel)  # relative to the conformance directory (FORMAT.md)
        z = groups[rel]
        own, cut, start = check_hista_cut(case, z)
        count = len(z["rewards"])
        resp = {j: z[f"response_{j}"].astype(np.float32) for j in range(count)}
        prompt = z["prompt"].astype(np.float32)
        hidden = GroupHidden(resp, lambda: prompt, lambda: start)
        rolls = tuple(Rollout(j, (), (), "", float(z["rewards"][j])) for j in range(count))
        state = State(case["id"], "p", own, cut, "")
        value = Hista(**params).raw_estimate(ProblemGroup({}, rolls, hidden_fn=hidden), [state])[0]
        return float(value), expected


def pacs_case(case: dict, path: Path, n: int) -> tuple[bool, str]:
    from sveb.estimators.pacs_loss import run_case  # scipy
    with _at(path, n, case):
        got = run_case(check_pacs(case))
        exp = case["expected"]
        psi, e_psi = np.asarray(got["psi"], float), np.asarray(exp["psi"], float)
        grad, e_grad = np.asarray(got["grad_log_ratio_sum"], float), np.asarray(exp["grad_log_ratio_sum"], float)
        worst_psi = float(np.max(np.abs(psi - e_psi) / np.maximum(np.abs(e_psi), 1e-300))) if len(psi) else 0.0
        ok = (psi.shape == e_psi.shape and grad.shape == e_grad.shape and worst_psi <= PSI_RTOL
              and abs(got["loss"] - exp["loss"]) <= TOL and bool(np.all(np.abs(grad - e_grad) <= TOL)))
        return ok, f"loss {got['loss']:.9g} vs {exp['loss']:.9g}"


def case_dirs(root: Path) -> list[Path]:
    """The conformance directories at or below `root` (each holds numca.jsonl, hista/cases.jsonl or pacs.jsonl),
    in path order: the set's top folder (public/, pacs/, and any part kept apart) runs whole."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"conformance: {root} is not a directory")
    found = {p.parent for name in ("numca.jsonl", "pacs.jsonl") for p in root.rglob(name) if p.is_file()}
    found |= {p.parent.parent for p in root.rglob("cases.jsonl")
              if p.parent.name == "hista" and p.parent != root and p.is_file()}  # not the folder above ROOT
    if not found:
        raise UsageError(f"conformance: {root} holds none of numca.jsonl, hista/cases.jsonl, pacs.jsonl, in it or "
                         f"a folder below it (see FORMAT.md)")
    return sorted(found)


def run_dir(root: Path, progress: Callable[[str], None] | None = None) -> list[Outcome]:
    """Every case of every conformance directory at or below `root`, in file order; the first bad case aborts
    (module docstring)."""
    out: list[Outcome] = []
    for d in case_dirs(root):
        out += _run_one(d, progress)
    return out


def _run_one(root: Path, progress: Callable[[str], None] | None) -> list[Outcome]:
    files = {"numca": root / "numca.jsonl", "hista": root / "hista" / "cases.jsonl", "pacs": root / "pacs.jsonl"}
    out: list[Outcome] = []
    groups: dict = {}
    for name, path in files.items():
        if not path.is_file():
            continue
        if progress:
            progress(f"{name}: {path}")
        ids: dict[str, int] = {}
        for n, case in _read_jsonl(path):
            if name == "pacs":
                ok, detail = pacs_case(case, path, n)
            else:
                got, want = numca_case(case, path, n) if name == "numca" else hista_case(case, root, path, n, groups)
                ok, detail = abs(got - want) <= TOL, f"{got:.9g} vs expected {want:.9g}"
            cid = case["id"]  # checked: a non-empty string
            if cid in ids:
                raise UsageError(f'{path}:{n}: case {cid}: "id" must be unique, but line {ids[cid]} has it too')
            ids[cid] = n
            rules = list(case.get("rules", []))
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
