"""benchmarks/validity.py, the predictive-validity pilot's driver and pre-registered analysis (issue 59): its numbers
against results/validity/plan.md's text; the analysis on synthetic run folders whose truth is known (tau, the
permutation p, the contrasts, the gradient spread, the verdicts, a seeded bootstrap, the refusal of missing runs);
`run --dry-run`'s 3 + 8 commands against the plan's command line; `run` on a stand-in for `sveb` (order, two at a
time, OMP_NUM_THREADS=1, the learning-rate rule, resumability); and one pilot command through the real `sveb rl`
CLI and loop (scripted engine, tiny random Llama), read back by the analysis."""

import dataclasses
import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("validity_bench", ROOT / "benchmarks" / "validity.py")
V = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = V  # its dataclasses look their module up
SPEC.loader.exec_module(V)
PLAN = V.PLAN
N = PLAN.eval_problems


def plan_text() -> str:
    return " ".join((ROOT / "results" / "validity" / "plan.md").read_text().split())


# ------------------------------------------------------------------------------------------- the plan's numbers


def test_the_plans_numbers_are_the_plan_mds():
    t = plan_text()
    assert "{1e-5, 3e-5, 1e-4}" in t and PLAN.lr_rates == (1e-5, 3e-5, 1e-4)
    assert "development seed (seed 99, grpo, train reward only, never the held-out set)" in t
    assert (PLAN.lr_seed, PLAN.lr_baseline) == (99, "grpo")
    assert "mean train reward over steps 3-5 is not more than 0.05 below step 1's" in t
    assert (PLAN.lr_window, PLAN.lr_tolerance, PLAN.lr_first) == ((3, 5), 0.05, 1)
    assert "(3 rates x 5 grpo steps)" in t and PLAN.lr_steps == 5
    assert "**Steps**: 12 per run" in t  # the design, raised by Amendment 3
    a3 = t.split("## Amendment 3")[1]
    assert "**Steps**: 24 a run (was 12)" in a3 and "`--eval-every 24`" in a3 and PLAN.steps == 24
    assert "the pilot samples with **`--engine vllm`**" in a3 and PLAN.engine == "vllm"
    sessions = ("the learning-rate screen, then noisy-s0 with noisy-s1, then grpo-s0 with grpo-s1; session B "
                "mcs-4-s0 with mcs-4-s1; session C mcs-1-s0 with mcs-1-s1")
    assert sessions in a3
    assert PLAN.order == tuple(re.findall(r"[a-z0-9-]+-s[01]", sessions)) and PLAN.cores == (0, 1)
    assert "**Seeds**: 2 per baseline (0 and 1)" in t and PLAN.seeds == (0, 1)
    assert "held-out set 128 of the test split" in t and "Every command above therefore reads `--train-pool 371`" in t
    assert (PLAN.train_pool, PLAN.eval_problems) == (371, 128)  # Amendment 2
    assert "**Step**: 8 problems x G = 8 rollouts, 200-token budget, temperature 0.7" in t
    assert (PLAN.problems, PLAN.rollouts, PLAN.max_tokens, PLAN.temperature) == (8, 8, 200, 0.7)
    assert "two runs at a time on the 2 cores, one torch thread each (`OMP_NUM_THREADS=1`)" in t
    assert (PLAN.parallel, PLAN.threads) == (2, 1)
    assert "in the order (mcs-4, grpo, mcs-1, noisy) x seed 0, then seed 1" in t  # Amendment 3 reorders them
    assert [a.label for a in PLAN.arms] == ["mcs-4", "grpo", "mcs-1", "noisy"]
    assert "(2,000 resamples, seed 59)" in t and "2,000 bootstrap resamples (seed 59)" in t
    assert (PLAN.boot, PLAN.boot_seed) == (2000, 59)
    assert "Primary: mcs-4 − noisy grpo (the offline extremes), one-sided, α = 0.05, alone" in t
    assert "Secondary: each other baseline against grpo, Holm over those 3" in t
    assert PLAN.primary == ("mcs-4", "noisy") and {a for a, b in PLAN.secondary} == {"mcs-4", "mcs-1", "noisy"}
    assert {b for a, b in PLAN.secondary} == {"grpo"} and PLAN.alpha == 0.05
    assert "(two-sided 0.05/3: 2.39 + 0.84 standard errors)" in t and "(one-sided 0.05: 1.64 + 0.84)" in t
    assert (PLAN.z_secondary, PLAN.z_primary, PLAN.z_power) == (2.39, 1.64, 0.84)
    # Amendment 1's table: the offline ranks, and the noisy baseline's noise
    amend = plan_text().split("## Amendment 1")[1]
    ranks = dict(re.findall(r"\| `([a-z0-9 .-]+)` \|[^|]*\|[^|]*\|[^|]*\| (\d) \|", amend))
    by_flag = {(a.baseline + (f" --noise {a.noise:g}" if a.noise else "")): a.offline_rank for a in PLAN.arms}
    assert {k: int(v) for k, v in ranks.items()} == by_flag == {"mcs-4": 1, "grpo": 2, "mcs-1": 3,
                                                               "grpo --noise 0.3": 4}


def test_dry_run_prints_the_screen_and_the_plans_eight_commands(tmp_path):
    lines = []
    assert V.main(["run", "--dry-run", "--out", "results/validity"], say=lines.append) == 0
    assert len(lines) == 3 + 8
    # Amendment 3's command (the design's, with Amendment 2's pool, 24 steps and vLLM) in its session order
    m = re.search(r"`(OMP_NUM_THREADS=1 sveb rl --baseline B \[--noise 0\.3\] .*? --out results/validity/runs/B-sS)`",
                  plan_text().split("## Amendment 3")[1])
    template = m.group(1)
    want = []
    for b, flag, s in (("noisy", "grpo --noise 0.3", 0), ("noisy", "grpo --noise 0.3", 1), ("grpo", "grpo", 0),
                       ("grpo", "grpo", 1), ("mcs-4", "mcs-4", 0), ("mcs-4", "mcs-4", 1), ("mcs-1", "mcs-1", 0),
                       ("mcs-1", "mcs-1", 1)):
        want.append(template.replace("B [--noise 0.3]", flag).replace("--seed S", f"--seed {s}")
                    .replace("runs/B-sS", f"runs/{b}-s{s}"))
    lr_file = ROOT / "results" / "validity" / "lr.json"  # once the screen ran, the commands carry its choice
    lr = V.rate(json.loads(lr_file.read_text())["chosen"]) if lr_file.exists() else "LR"
    assert lines[3:] == [w.replace("--lr LR", f"--lr {lr}") for w in want]
    pilot = want[2].replace("--lr LR --out results/validity/runs/grpo-s0", "")
    for line, lr in zip(lines[:3], ("1e-05", "3e-05", "0.0001")):
        # the screen: grpo at seed 99, 5 steps, no held-out problem, the pilot's settings otherwise
        assert line == (pilot.replace("--steps 24 --seed 0 --eval-every 24 --eval-problems 128",
                                      "--steps 5 --seed 99 --eval-every 5 --eval-problems 0")
                        + f"--lr {lr} --out results/validity/lr/grpo-s99-lr{lr}")
    lines = []  # --runs: the screen and the named runs only; a name that is not a run is refused in one line
    assert V.main(["run", "--dry-run", "--runs", "mcs-4-s1,grpo-s0"], say=lines.append) == 0
    assert lines[3:] == [want[2].replace("--lr LR", f"--lr {lr}"), want[5].replace("--lr LR", f"--lr {lr}")]
    lines = []
    assert V.main(["run", "--dry-run", "--runs", "mcs4-s1"], say=lines.append) == 1
    assert lines == ["validity run: --runs mcs4-s1 is not a pilot run (one of " + ", ".join(PLAN.order) + ")"]
    # once lr.json holds the choice, the pilot's commands carry it
    (tmp_path / "lr.json").write_text(json.dumps({"chosen": 3e-5}))
    lines = []
    V.main(["run", "--dry-run", "--out", str(tmp_path)], say=lines.append)
    assert all("--lr 3e-05 " in line for line in lines[3:])


def test_the_learning_rate_rule():
    r = {1e-5: [0.2, 0.2, 0.2, 0.2, 0.2], 3e-5: [0.2, 0.3, 0.16, 0.16, 0.16], 1e-4: [0.2, 0.1, 0.1, 0.2, 0.1]}
    got = V.lr_choice(PLAN, r)
    assert got["chosen"] == 3e-5 and [x["ok"] for x in got["rates"]] == [True, True, False]
    assert got["rates"][2]["mean_steps_3_5"] == pytest.approx(0.4 / 3)
    assert V.lr_choice(PLAN, {**r, 1e-4: [0.2, 0.2, 0.15, 0.15, 0.15]})["chosen"] == 1e-4  # 0.05 below: allowed
    none = V.lr_choice(PLAN, {k: [0.5, 0, 0, 0, 0] for k in r})
    assert none["chosen"] == 1e-5 and none["chosen_by"].startswith("none passed")


# --------------------------------------------------------------------------------- the analysis on known truth


def config(arm, seed, steps=PLAN.steps, eval_problems=N, lr=3e-5):
    from sveb.experiment.rl import RLConfig
    cfg = RLConfig(baseline=arm.baseline, noise=arm.noise, steps=steps, seed=seed, cuts=PLAN.cuts,
                   train_layers=PLAN.train_layers, lr=lr, eval_every=steps, eval_problems=eval_problems,
                   dtype=PLAN.dtype, batch_size=PLAN.batch_size, engine=PLAN.engine)
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def write_run(runs, arm, seed, start, final, grad_var, reward=None, steps=PLAN.steps):
    """A run folder as `sveb rl` writes it: config.json and log.jsonl (step 0 and the last step evaluated)."""
    folder = runs / f"{arm.label}-s{seed}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config(arm, seed, steps), indent=2, sort_keys=True))
    ids = [f"number-test-{i:04d}" for i in range(len(final))]
    rows = [{"step": 0, "held_out_acc": float(np.mean(start)), "held_out": dict(zip(ids, map(float, start)))}]
    for s in range(1, steps + 1):
        row = {"step": s, "reward": (reward or [0.2] * steps)[s - 1], "adv_abs": 0.3, "loss": 0.01,
               "grad_var": float(grad_var[(s - 1) % len(grad_var)]), "grad_norm": 0.5,
               "seconds": {"sample": 1.0, "baseline": 0.1, "update": 0.5}}
        if s == steps:
            row.update(held_out_acc=float(np.mean(final)), held_out=dict(zip(ids, map(float, final))))
            row["seconds"]["eval"] = 2.0
        rows.append(row)
    (folder / "log.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return folder


def nested(k):
    """Problems 0..k-1 right, the rest wrong: two such policies differ only on the problems between their k's."""
    return np.arange(N) < k


START = nested(30)
# accuracies by offline rank, seed 0 and seed 1: mcs-4 best ... noisy worst
GOOD = {"mcs-4": (80, 76), "grpo": (60, 62), "mcs-1": (44, 40), "noisy": (20, 24)}
# grad_var per step, alternating two values: the run's mean is their mean
SPREAD = {"mcs-4": ((1.0, 2.0), (1.2, 1.8)), "grpo": ((2.0, 3.0), (2.5, 2.5)), "mcs-1": ((3.0, 5.0), (4.0, 4.0)),
          "noisy": ((6.0, 8.0), (7.0, 7.0))}


def pilot(tmp_path, acc=GOOD, spread=SPREAD, final=None):
    runs = tmp_path / "runs"
    for seed in PLAN.seeds:
        for arm in PLAN.arms:
            f = final(arm.label, seed) if final else nested(acc[arm.label][seed])
            write_run(runs, arm, seed, START, f, spread[arm.label][seed])
    return tmp_path


def analyze(out, *extra):
    said = []
    rc = V.main(["analyze", "--out", str(out), *extra], say=said.append)
    res = json.loads((out / "result.json").read_text()) if rc == 0 else None
    return rc, said, res


def test_offline_order_reproduced_is_predicted_with_tau_1_and_p_one_in_24(tmp_path):
    out = pilot(tmp_path)
    rc, said, res = analyze(out)
    assert rc == 0 and "prediction predicted" in said[0] and "mechanism holds" in said[0]
    per = res["per_baseline"]
    assert per["mcs-4"]["acc"] == pytest.approx((80 + 76) / 2 / N)
    assert per["mcs-4"]["acc_seed_range"] == pytest.approx([76 / N, 80 / N])
    lo, hi = per["grpo"]["acc_ci"]
    y = (nested(60).astype(float) + nested(62)) / 2  # the per-problem mean over the 2 seeds: the clustered interval
    se = y.std(ddof=1) / np.sqrt(N)
    assert (lo, hi) == pytest.approx((y.mean() - 1.97897 * se, y.mean() + 1.97897 * se), abs=1e-4)
    # the gradient spread: the mean over steps and runs; constant-pair runs, so the bootstrap stays near it
    assert per["mcs-4"]["grad_var"] == pytest.approx(1.5) and per["noisy"]["grad_var"] == pytest.approx(7.0)
    assert per["mcs-1"]["grad_var_ci"][0] < 4.0 < per["mcs-1"]["grad_var_ci"][1] < per["noisy"]["grad_var_ci"][0]
    tau = res["tau"]
    assert tau["acc"]["tau"] == 1.0 and tau["grad"]["tau"] == 1.0
    assert tau["acc"]["p_perm"] == pytest.approx(1 / 24) and tau["grad"]["p_perm"] == pytest.approx(1 / 24)
    assert tau["acc"]["ci"] == [1.0, 1.0]  # nested outcomes 16+ problems apart: every resample keeps the order
    assert tau["acc"]["order"] == ["mcs-4", "grpo", "mcs-1", "noisy"]
    prim = res["primary"]
    assert prim["mean"] == pytest.approx((78 - 22) / N) and prim["p"] < 1e-6 and prim["alternative"] == "greater"
    assert [c["a"] for c in res["secondary"]] == ["mcs-4", "mcs-1", "noisy"]
    ps = sorted(c["p"] for c in res["secondary"])
    assert sorted(c["p_holm"] for c in res["secondary"]) == pytest.approx([3 * ps[0], 2 * ps[1], ps[2]])
    assert res["start_identical"] and res["verdict"]["prediction"] == "predicted"
    md = (out / "result.md").read_text()
    assert "**Prediction: predicted**" in md and "**Mechanism holds**" in md and "PARTIAL" not in md
    assert (out / "curves.png").stat().st_size > 10_000


def test_the_bootstrap_is_seeded(tmp_path):
    out = pilot(tmp_path)
    analyze(out)
    first = (out / "result.json").read_text()
    analyze(out)
    assert (out / "result.json").read_text() == first


def test_the_order_reversed_gives_tau_minus_1_and_not_predicted(tmp_path):
    rev = {"mcs-4": (20, 24), "grpo": (44, 40), "mcs-1": (60, 62), "noisy": (80, 76)}
    spread = {k: SPREAD[o] for k, o in zip(("mcs-4", "grpo", "mcs-1", "noisy"), ("noisy", "mcs-1", "grpo", "mcs-4"))}
    rc, said, res = analyze(pilot(tmp_path, rev, spread))
    assert res["tau"]["acc"]["tau"] == -1.0 and res["tau"]["grad"]["tau"] == -1.0
    assert res["tau"]["acc"]["p_perm"] == 1.0 and res["tau"]["grad"]["ci"] == [-1.0, -1.0]
    assert res["primary"]["mean"] < 0 and res["primary"]["p"] > 0.99
    assert res["verdict"]["mechanism"] == "reversed"
    # tau_acc <= 0, but the contrasts (+-0.44) lie far outside the detectable difference: the plan's rule says
    # "did not" only when every contrast's interval lies within it, so this is inconclusive
    assert not res["verdict"]["contrasts_within_detectable"] and res["verdict"]["prediction"] == "inconclusive"


def test_no_difference_within_the_detectable_difference_did_not_predict(tmp_path):
    """Runs of about equal accuracy (40 or 41 of 128, independent outcomes), the order slightly reversed: tau_acc
    < 0 and every contrast's interval inside the detectable difference the plan's formula gives at the pilot's own
    p, rho and sigma_s."""
    ks = {"mcs-4": (40, 40), "grpo": (40, 40), "mcs-1": (40, 41), "noisy": (41, 40)}

    def final(label, seed):
        y = np.zeros(N, bool)
        y[np.random.default_rng([list(ks).index(label), seed]).choice(N, ks[label][seed], replace=False)] = True
        return y

    rc, said, res = analyze(pilot(tmp_path, final=final))
    assert res["tau"]["acc"]["tau"] < 0 and res["tau"]["acc"]["p_perm"] > 0.5
    d = res["detectable"]
    assert abs(d["rho"]) < 0.2 and d["rho_pairs"] == 12 and d["sigma_s"] == pytest.approx(1 / (2 * N))
    assert d["p"] == pytest.approx(322 / (8 * N))
    se = np.sqrt(d["p"] * (1 - d["p"]) * (1 - d["rho"]) / N + d["sigma_s"] ** 2)
    assert d["secondary"] == pytest.approx(3.23 * se) and d["primary"] == pytest.approx(2.48 * se)
    assert res["primary"]["mean"] == pytest.approx(-1 / (2 * N))
    assert res["verdict"]["contrasts_within_detectable"] and res["verdict"]["prediction"] == "did not"
    assert "**Prediction: did not**" in (tmp_path / "result.md").read_text()


def test_a_missing_or_unfinished_run_is_refused_in_one_line_unless_partial(tmp_path):
    import shutil
    out = pilot(tmp_path)
    shutil.rmtree(out / "runs" / "mcs-1-s1")
    log = out / "runs" / "noisy-s1" / "log.jsonl"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:6]))  # steps 0-5
    rc, said, _ = analyze(out)
    assert rc == 1 and len(said) == 1 and "runs/mcs-1-s1 is missing" in said[0] and "(and 1 more)" in said[0]
    rc, said, res = analyze(out, "--partial")
    assert rc == 0 and "(PARTIAL)" in said[0]
    md = (out / "result.md").read_text()
    assert md.splitlines()[2].startswith("**PARTIAL") and f"noisy-s1 is incomplete (5 of {PLAN.steps} steps" in md
    assert [r["steps"] for r in res["runs"] if r["baseline"] == "noisy"] == [PLAN.steps, 5]
    assert len([r for r in res["runs"] if r["baseline"] == "mcs-1"]) == 1


def test_a_run_made_with_other_settings_is_refused(tmp_path):
    out = pilot(tmp_path)
    cfg = out / "runs" / "grpo-s1" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "eval_problems": 64}))
    rc, said, _ = analyze(out, "--partial")
    assert rc == 1 and "grpo-s1: config.json has eval_problems=64, the plan 128" in said[0]


# ------------------------------------------------------------------------------------------------------ run

FAKE = r'''
import json, os, sys, time
from pathlib import Path
a = sys.argv[1:]
assert a[0] == "rl"
opt, i = {}, 1
while i < len(a):
    opt[a[i][2:]] = a[i + 1]
    i += 2
out, steps, lr = Path(opt["out"]), int(opt["steps"]), float(opt["lr"])
ev = Path(os.environ["FAKE_EVENTS"])
def event(kind):
    with ev.open("a") as f:
        f.write(json.dumps({"kind": kind, "run": out.name, "t": time.time(), "omp": os.environ.get("OMP_NUM_THREADS"),
                            "argv": a, "bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND"),
                            "cpus": sorted(os.sched_getaffinity(0))}) + "\n")
event("start")
log = out / "log.jsonl"
rows = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
if not rows:
    rows.append({"step": 0, "held_out_acc": 0.5, "held_out": {}})
for step in range(len(rows), steps + 1):
    if os.environ.get("FAKE_FAIL") == out.name and step == 2:
        event("end")
        sys.exit(3)
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0.02")))
    reward = 0.25 if (step == 1 or lr < 5e-5) else 0.1   # 1e-4 drops by 0.15 after step 1: the rule takes 3e-5
    rows.append({"step": step, "reward": reward, "grad_var": 1.0})
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
event("end")
'''


@pytest.mark.slow  # subprocesses / the real loop: `make test` runs it, `make test-unit` not
def test_run_screens_the_rate_then_runs_two_at_a_time_in_order_and_resumes(tmp_path, monkeypatch):
    fake = tmp_path / "fake_sveb.py"
    fake.write_text(FAKE)
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("FAKE_EVENTS", str(events))
    monkeypatch.setattr(V, "POLL_S", 0.02)
    plan = dataclasses.replace(PLAN, steps=3)
    out = tmp_path / "validity"
    args = ["run", "--out", str(out), "--sveb", f"{sys.executable} {fake}"]
    monkeypatch.setenv("FAKE_FAIL", "noisy-s1")
    monkeypatch.setenv("FAKE_SLEEP", "0.3")  # noisy-s1 fails after 1 step, long before noisy-s0 ends its 3
    said = []
    assert V.main(args, plan=plan, say=said.append) == 1  # a run that fails: reported, nothing new starts after it
    assert any("FAILED noisy-s1 (exit 3, at step 1 of 3" in s for s in said)
    said1 = said
    monkeypatch.delenv("FAKE_FAIL")
    monkeypatch.delenv("FAKE_SLEEP")
    said = []
    assert V.main(args, plan=plan, say=said.append) == 0
    ev = [json.loads(x) for x in events.read_text().splitlines()]
    starts = [s.split()[1].rstrip(":") for s in said1 + said if s.startswith("  start ")]  # the driver's order
    screen = ["grpo-s99-lr1e-05", "grpo-s99-lr3e-05", "grpo-s99-lr0.0001"]
    order = ["noisy-s0", "noisy-s1", "grpo-s0", "grpo-s1", "mcs-4-s0", "mcs-4-s1", "mcs-1-s0", "mcs-1-s1"]
    first = starts[:starts.index("noisy-s1") + 1]
    assert first == screen + order[:2]  # the first invocation stopped starting runs after noisy-s1 failed
    assert starts[len(first):] == ["noisy-s1"] + order[2:]  # the second: noisy-s1 resumed, the rest in order
    assert any("start noisy-s1 (resuming after step 1)" in s for s in said)
    assert sum("finished" in s for s in said) == 3 + 1  # the screen and noisy-s0 skipped
    assert {e["omp"] for e in ev} == {"1"}
    # each run on its own core: two that overlap never share one (where the machine has two and taskset)
    import os
    import shutil
    if (os.cpu_count() or 1) >= 2:
        starts_ev = [e for e in ev if e["kind"] == "start"]
        assert all(e["bind"] in ("0", "1") for e in starts_ev)
        if shutil.which("taskset"):
            assert all(e["cpus"] == [int(e["bind"])] for e in starts_ev)
        live = {}
        for e in sorted(ev, key=lambda e: e["t"]):
            if e["kind"] == "start":
                assert e["bind"] not in live.values()
                live[e["run"]] = e["bind"]
            else:
                live.pop(e["run"], None)
    # never more than two at a time
    t = sorted([(e["t"], 1 if e["kind"] == "start" else -1) for e in ev])
    assert max(np.cumsum([d for _, d in t])) <= 2
    lr = json.loads((out / "lr.json").read_text())
    assert lr["chosen"] == 3e-5 and [r["ok"] for r in lr["rates"]] == [True, True, False]
    pilot_argv = [e["argv"] for e in ev if e["kind"] == "start" and e["run"] in order]
    assert all(a[a.index("--lr") + 1] == "3e-05" for a in pilot_argv)
    assert (out / "runs" / "noisy-s1" / "run.log").exists() and (out / "lr" / screen[0] / "run.log").exists()
    n = len(ev)
    said = []
    assert V.main(args, plan=plan, say=said.append) == 0
    assert len(events.read_text().splitlines()) == n  # a third invocation starts nothing
    assert sum("finished" in s for s in said) == 11
    assert not (out / ".run.pid").exists()
    (out / ".run.pid").write_text(str(os.getppid()))  # a live process: another driver on the same folder
    said = []
    assert V.main(args, plan=plan, say=said.append) == 1 and "another `run`" in said[0]


@pytest.mark.slow  # subprocesses
def test_runs_picks_a_sessions_runs_and_names_the_ones_left(tmp_path, monkeypatch):
    fake = tmp_path / "fake_sveb.py"
    fake.write_text(FAKE)
    monkeypatch.setenv("FAKE_EVENTS", str(tmp_path / "events.jsonl"))
    monkeypatch.setattr(V, "POLL_S", 0.02)
    plan = dataclasses.replace(PLAN, steps=1, lr_steps=5)
    out = tmp_path / "validity"
    said = []
    args = ["run", "--out", str(out), "--sveb", f"{sys.executable} {fake}", "--runs", "grpo-s1,noisy-s0"]
    assert V.main(args, plan=plan, say=said.append) == 0
    assert sorted(x.name for x in (out / "runs").iterdir()) == ["grpo-s1", "noisy-s0"]
    assert said[-1] == ("runs done: noisy-s0, grpo-s1; not yet run: noisy-s1, grpo-s0, mcs-4-s0, mcs-4-s1, mcs-1-s0, "
                        "mcs-1-s1 (python benchmarks/validity.py run --runs ...)")


@pytest.mark.slow  # subprocesses / the real loop: `make test` runs it, `make test-unit` not
def test_a_pilot_command_through_the_real_cli_and_loop_feeds_the_analysis(tmp_path, monkeypatch):
    """Two of the plan's commands (steps and sizes shrunk) through `sveb rl` itself, on the scripted engine and a
    tiny random Llama: the logs they write are what analyze reads; a rerun of a finished run adds nothing."""
    import torch
    from typer.testing import CliRunner

    import sveb.experiment.rl.policy as policy
    from sveb.cli import app
    from tests.helpers.rl import problems, tiny_llama
    torch.set_num_threads(1)
    from sveb.engines.scripted import ScriptedEngine
    assert PLAN.engine == "vllm"  # the plan's commands say --engine vllm: the stand-in samples in vLLM's place
    monkeypatch.setattr(policy, "vllm_policy", lambda model, dtype, weights: (ScriptedEngine(), tiny_llama()))
    monkeypatch.setattr(policy, "number_pools", lambda n, m: (problems(6), problems(m, offset=20)))
    plan = dataclasses.replace(PLAN, steps=2, eval_problems=4, train_layers=1, problems=2, rollouts=2,
                               max_tokens=40)
    out = tmp_path / "validity"
    jobs = {j.name: j for j in V.pilot_jobs(plan, out, "1e-3")}
    extra = ["--problems", "2", "--rollouts", "2", "--max-tokens", "40"]  # sveb rl's defaults are the plan's
    for name in ("grpo-s0", "noisy-s0"):
        res = CliRunner().invoke(app, [*jobs[name].args, *extra])
        assert res.exit_code == 0, res.output
    log = (out / "runs" / "grpo-s0" / "log.jsonl").read_text()
    res = CliRunner().invoke(app, [*jobs["grpo-s0"].args, *extra])
    assert res.exit_code == 0 and (out / "runs" / "grpo-s0" / "log.jsonl").read_text() == log
    said = []
    assert V.main(["analyze", "--out", str(out), "--partial"], plan=plan, say=said.append) == 0, said
    res = json.loads((out / "result.json").read_text())
    assert [(r["baseline"], r["steps"], r["complete"]) for r in res["runs"]] == [("grpo", 2, True),
                                                                                 ("noisy", 2, True)]
    assert res["start_identical"] and res["problems"] == 4
    grpo, noisy = (r["grad_var_mean"] for r in res["runs"])
    assert 0 <= grpo < noisy  # the same rollouts (seed 0), the noise adds spread
    assert res["secondary"][0]["a"] == "noisy" and res["primary"] is None
