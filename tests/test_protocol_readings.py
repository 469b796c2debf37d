"""The protocol study reads its flips as the tests allow (sveb.experiment.protocols_files): Holm over each setting's
Δ of Δ, a flip without a significant Δ of Δ called a change of power, and the tables leading with that."""

from types import SimpleNamespace

import pytest

from sveb.experiment import protocols_files as pf
from sveb.score import scoring


def _row(setting, name, protocol="held-out", p=None, flips="no", verdict="no difference", sveb="no difference"):
    r = {c: "" for c in pf.COLUMNS} | {"setting": setting, "domain": "number", "estimator": name,
                                       "protocol": protocol, "flips_vs_sveb": flips, "verdict": verdict,
                                       "sveb_verdict": sveb}
    if p is not None:
        r |= {"p_d_delta_sq": p, "d_delta_sq_vs_sveb": -0.01, "d_delta_sq_ci_low": -0.02, "d_delta_sq_ci_high": 0.0,
              "shared_problems": 40}
    return r


def _rows():
    return [_row("number-sveb", "grpo", flips="-"), _row("number-sveb", "pacs", flips="-", verdict="worse"),
            _row("number-cut", "grpo", p=1.0, flips="-"),  # grpo's Δ of Δ is 0 by construction: not in a family
            _row("number-cut", "pacs", p=0.02, flips="yes", sveb="worse"),  # a flip, p 0.02 alone, 0.06 over three
            _row("number-cut", "hista", p=0.5), _row("number-cut", "mcs-1", p=0.9),
            _row("number-mcs", "mcs-4-ref", p=0.004, flips="yes", verdict="better"),
            _row("number-mcs", "mcs-3-ref", p=0.01),  # significant after Holm, no flip
            _row("number-tiers", "mcs-1", flips="yes", sveb="worse")]  # a flip with no problem shared


def test_holm_runs_over_each_setting_and_labels_each_flip():
    rows = _rows()
    pf.readings(rows)
    by = {(r["setting"], r["estimator"]): r for r in rows}
    assert by[("number-cut", "pacs")]["p_d_delta_sq_holm"] == pytest.approx(scoring.holm([0.02, 0.5, 0.9])[0])
    assert by[("number-cut", "pacs")]["p_d_delta_sq_holm"] == pytest.approx(0.06)
    assert by[("number-cut", "grpo")]["p_d_delta_sq_holm"] == ""
    assert by[("number-cut", "pacs")]["reading"] == pf.POWER  # crossed the threshold, Δ of Δ not significant
    assert by[("number-mcs", "mcs-4-ref")]["p_d_delta_sq_holm"] == pytest.approx(0.008)  # its own family of two
    assert by[("number-mcs", "mcs-4-ref")]["reading"] == pf.EFFECT
    assert by[("number-mcs", "mcs-3-ref")]["reading"] == pf.KEPT
    assert by[("number-tiers", "mcs-1")]["reading"].startswith("untested")
    assert by[("number-cut", "hista")]["reading"] == ""


def test_the_tables_lead_with_the_delta_of_delta():
    rows = _rows()
    pf.readings(rows)
    settings = [SimpleNamespace(key=k, domain="number", label=k) for k in ("number-sveb", "number-cut", "number-mcs",
                                                                          "number-tiers")]
    md = pf.markdown(rows, settings, [], ["grpo", "pacs", "hista", "mcs-1"])
    lead = md.index("## What each setting changes")
    assert lead < md.index("## Settings") < md.index("## number, held-out") < md.index("Verdicts that flip")
    first = md[lead:md.index("## Settings")]
    assert "| number-cut | 3 | 0 | pacs held-out: -0.0100 [-0.0200, +0.0000], Holm p 0.0600 | 1 | 0 |" in first
    assert "| number-mcs | 2 | 2 |" in first and "a change of power, not an effect" in first
    flips = md[md.index("Verdicts that flip"):md.index("## The numbers")]
    assert "| 0.0600 | 40 | a change of power, not an effect |" in flips
