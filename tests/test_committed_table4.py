"""The committed Table 4 (results/table4, regenerated for issue 56) checked as a referee would: rescored from its
committed estimates and exports into a fresh folder it comes out byte for byte; and its untrained cells, recomputed here
with code of this file only (numpy and scipy, none of sveb.score), agree with scores.csv: MAE, the paired Δ of
squared error against grpo, its cluster-robust (CR1, problems as clusters) t-test, and Holm within each family."""

import csv
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
T4 = ROOT / "results" / "table4"
OUTPUTS = ("scores.csv", "table4.md", "domains.csv", "cost.csv", "interaction.csv", "timing.csv")


def _same(a: str, b: str) -> bool:
    """Equal text, or equal CSV whose numbers agree to 1e-9 relative: a CPU of another kind may round the last
    bit of a vectorised exp or log differently (the committed table was made on an AVX-512 machine)."""
    if a == b:
        return True
    ra, rb = list(csv.reader(a.splitlines())), list(csv.reader(b.splitlines()))
    if len(ra) != len(rb) or any(len(x) != len(y) for x, y in zip(ra, rb)):
        return False
    for x, y in zip(ra, rb):
        for u, v in zip(x, y):
            if u == v:
                continue
            try:
                if not np.isclose(float(u), float(v), rtol=1e-9, atol=1e-12):
                    return False
            except ValueError:
                return False
    return True


def _scores() -> list[dict]:
    return list(csv.DictReader(open(T4 / "scores.csv")))


def _domains() -> list[str]:
    return list(dict.fromkeys(r["domain"] for r in _scores()))


def test_the_committed_table_rescores_byte_for_byte(tmp_path):
    """`benchmarks/table4.py --from-exports` on the committed estimates and exports writes every table again as
    committed (the CSVs' numbers to 1e-9 on a CPU of another kind): nothing in them depends on a file that is not
    committed (the trained checkpoints, sveb_data)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("table4_bench", ROOT / "benchmarks" / "table4.py")
    table4 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table4)
    out = tmp_path / "out"
    out.mkdir()
    for f in ("timing.json", "table4.md"):  # the run's recorded seconds and CPU flags, which a rescore keeps
        shutil.copy(T4 / f, out / f)
    estimators = [r["estimator"] for r in _scores() if r["domain"] == _domains()[0] and r["protocol"] == "held-out"]
    table4.main(["--from-exports", "--domains", ",".join(_domains()), "--estimators", ",".join(estimators),
                 "--seeds", "0,1,2", "--dtype", "float32", "--exports", str(T4 / "exports"), "--out", str(out),
                 "--estimates", str(T4 / "estimates.parquet")])
    for f in OUTPUTS:
        assert _same((out / f).read_text(), (T4 / f).read_text()), f
    assert not _same("a,0.1\n", "a,0.1000001\n") and _same("a,0.1\n", "a,0.10000000000000003\n")


def _per_state(domain: str) -> dict:
    """{(estimator, protocol): {state_id: value}} of the default settings and default training, and
    {state_id: (reference, problem_id)} over every export of the domain."""
    refs = {}
    for exp in sorted((T4 / "exports").iterdir()):
        if exp.name != domain and not exp.name.startswith(f"{domain}-seed"):
            continue
        states = pq.read_table(exp / "states").to_pylist()
        value = {r["state_id"]: r["value"] for r in pq.read_table(exp / "references").to_pylist()}
        refs.update({s["state_id"]: (value[s["state_id"]], s["problem_id"]) for s in states})
    t = pq.read_table(T4 / "estimates.parquet").to_pylist()
    est: dict = {}
    for r in t:
        if r["domain"] == domain and r["training"] is None:
            cell = est.setdefault((r["estimator"], r["protocol"]), {})
            cell.setdefault(r["params_fp"], {})[r["state_id"]] = r["value"]
    # one setting each; a trained estimator's replicates carry `training`, so its default is the one left here
    assert all(len(v) == 1 for v in est.values()), [k for k, v in est.items() if len(v) != 1]
    return {k: next(iter(v.values())) for k, v in est.items()}, refs


def _cr1(delta: np.ndarray, clusters: np.ndarray) -> tuple[float, float, int]:
    """Mean, its CR1 standard error over clusters, and df = clusters - 1."""
    n, ids = len(delta), np.unique(clusters)
    g = len(ids)
    e = delta - delta.mean()
    sums = np.array([e[clusters == c].sum() for c in ids])
    se = np.sqrt(g / (g - 1) * (sums ** 2).sum()) / n
    return float(delta.mean()), float(se), g - 1


def _holm(ps: list[float], m: int) -> list[float]:
    """Holm-adjusted p of a family of size m (members unscored count in m) for the given raw p's."""
    order = np.argsort(ps)
    adj, run = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (m - rank) * ps[i]))
        adj[i] = run
    return adj


@pytest.mark.parametrize("domain", _domains() if (T4 / "scores.csv").exists() else [])
def test_untrained_cells_recomputed_independently(domain):
    est, refs = _per_state(domain)
    rows = [r for r in _scores() if r["domain"] == domain]
    checked = 0
    for r in rows:
        if r["trainings"] or r["estimator"] == "grpo":  # trained cells: the test over trainings, not re-derived here
            continue
        e, g = est[(r["estimator"], r["protocol"])], est[("grpo", r["protocol"])]
        ids = sorted(e)
        assert sorted(g) == ids and set(ids) <= set(refs) and len(ids) == int(r["n_states"])
        v, b = np.array([e[i] for i in ids]), np.array([g[i] for i in ids])
        ref, clusters = np.array([refs[i][0] for i in ids]), np.array([refs[i][1] for i in ids])
        assert np.mean(np.abs(v - ref)) == pytest.approx(float(r["mae"]), abs=1e-9)
        mean, se, df = _cr1((v - ref) ** 2 - (b - ref) ** 2, clusters)
        p = 2 * stats.t.sf(abs(mean / se), df)
        assert (mean, se, df) == (pytest.approx(float(r["delta_sq"]), abs=1e-9),
                                  pytest.approx(float(r["delta_sq_se"]), rel=1e-6), int(r["df"]))
        assert p == pytest.approx(float(r["p"]), rel=1e-5, abs=1e-12)
        checked += 1
    assert checked >= 30  # both protocols' untrained rows
    # Holm within each (protocol, family) from the rows' raw p (the trained ones' from the test over trainings)
    fams: dict = {}
    for r in rows:
        if r["family"]:
            fams.setdefault((r["protocol"], r["family"]), []).append(r)
    for (proto, fam), members in fams.items():
        adj = _holm([float(m["p"]) for m in members], int(members[0]["family_size"]))
        for m, a in zip(members, adj):
            assert a == pytest.approx(float(m["p_holm"]), rel=1e-9), (proto, fam, m["estimator"])
            want = "no difference" if a >= 0.05 else "better" if float(m["delta_sq"]) < 0 else "worse"
            assert m["verdict"] == want, (proto, fam, m["estimator"])


def test_the_makefiles_table4_configs_are_the_committed_exports():
    """`make table4` resumes domain by domain across sessions and machines: the config it computes today for each
    committed export (the Makefile's flags) must still give that export's fingerprint, or a later domain would be
    sampled under another config than the earlier ones. Builtin-source domains only: a file source's config holds
    the file's path on the machine that sampled it."""
    import importlib.util
    import re

    from sveb.experiment.table4 import configs
    from sveb.sample.rules import stage_fps
    from sveb.store import load_manifest
    spec = importlib.util.spec_from_file_location("table4_bench", ROOT / "benchmarks" / "table4.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    make = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    flags = re.search(r"^T4 = (.*)$", make, re.M).group(1).replace("$(T4_ESTIMATORS)", "grpo").split()
    a = bench.parse(flags)
    checked = 0
    for m in sorted((T4 / "exports").glob("*/manifest.json")):
        name = m.parent.name
        domain, _, tail = name.partition("-")
        if a.source.get(domain, "builtin") != "builtin":
            continue
        test, train = configs(domain, a, "builtin", int(tail.removeprefix("seed")) if tail.startswith("seed") else 0)
        cfg = train if tail == "train" else test
        assert stage_fps(cfg)["references"] == load_manifest(m.parent).build_fp, name
        checked += 1
    assert checked >= 8  # number's and general's four builds each
