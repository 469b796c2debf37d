"""The predictive-validity pilot (issue 59): its driver and its pre-registered analysis. The design, the analysis
and the decision rule are results/validity/plan.md (with its Amendments 1-3); `PLAN` below holds every number of it
that this script uses, and tests/test_validity.py compares them with the plan's text. The loop is `sveb rl`
(docs/validity.md). This analysis was committed before any pilot run existed.

    python benchmarks/validity.py run              # the learning-rate screen, then the 8 pilot runs; rerun to resume
    python benchmarks/validity.py run --runs noisy-s0,noisy-s1   # the screen (if unfinished), then these runs only
    python benchmarks/validity.py run --dry-run    # the 3 + 8 commands, nothing run
    python benchmarks/validity.py analyze          # results/validity/result.md, result.json, curves.png
    python benchmarks/validity.py analyze --partial   # what the runs so far give, marked partial at the top

`run`: first the learning-rate screen (seed 99, grpo, 5 steps at each of 1e-5, 3e-5 and 1e-4, train reward only:
`--eval-problems 0`, the held-out set is never sampled), whose choice and numbers go to OUT/lr.json; then the
pilot's 8 runs in Amendment 3's session order (noisy, grpo, mcs-4, mcs-1, each at seeds 0 and 1) into OUT/runs/B-sS
(noisy grpo's folder is noisy-sS); `--runs` picks the session's runs. Two `sveb rl` processes at a time,
OMP_NUM_THREADS=1 each, each pinned to its own core (taskset, and VLLM_CPU_OMP_THREADS_BIND for vLLM's threads)
with tcmalloc preloaded; each one's output is appended to run.log in its folder. Every run is resumable:
rerunning `run` skips finished runs and resumes the others from their newest checkpoint (`sveb rl` does).
`analyze` reads OUT/runs and refuses in one line, naming the run folder, while a run is missing or incomplete,
unless --partial.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Arm:
    """A baseline of the pilot: its run folders' name, `sveb rl`'s --baseline and --noise, its offline rank."""
    label: str
    baseline: str
    noise: float
    offline_rank: int


@dataclass(frozen=True)
class Plan:
    """results/validity/plan.md's numbers (Amendment 1's offline ranks, Amendment 3's steps, engine and order)."""
    # Design: baselines in the offline order (Amendment 1: mcs-4 0.094, grpo 0.140, mcs-1 0.153 held-out MAE,
    # grpo --noise 0.3 by construction last); the runs start in `order` below
    arms: tuple[Arm, ...] = (Arm("mcs-4", "mcs-4", 0.0, 1), Arm("grpo", "grpo", 0.0, 2),
                             Arm("mcs-1", "mcs-1", 0.0, 3), Arm("noisy", "grpo", 0.3, 4))
    seeds: tuple[int, ...] = (0, 1)
    steps: int = 24              # Amendment 3 (was 12): the mcs-4 run fits one session with vLLM
    engine: str = "vllm"         # Amendment 3 (was the hf engine)
    # Amendment 3: the order runs start in, by session (A: the screen, noisy, grpo; B: mcs-4; C: mcs-1)
    order: tuple[str, ...] = ("noisy-s0", "noisy-s1", "grpo-s0", "grpo-s1", "mcs-4-s0", "mcs-4-s1",
                              "mcs-1-s0", "mcs-1-s1")
    eval_problems: int = 128
    train_pool: int = 371       # Amendment 2: the train split's seed-0 slot holds 371 (512 never loaded)
    train_layers: int = 4
    batch_size: int = 8
    cuts: int = 1
    dtype: str = "float32"
    problems: int = 8            # per step (sveb rl's default, checked in each run's config.json)
    rollouts: int = 8            # G
    max_tokens: int = 200
    temperature: float = 0.7
    model: str = "smollm2-135m"
    parallel: int = 2            # runs at a time
    threads: int = 1             # OMP_NUM_THREADS of each
    cores: tuple[int, ...] = (0, 1)  # the core each of the `parallel` slots is pinned to
    # the learning-rate screen
    lr_rates: tuple[float, ...] = (1e-5, 3e-5, 1e-4)
    lr_seed: int = 99
    lr_baseline: str = "grpo"
    lr_steps: int = 5
    lr_first: int = 1            # step 1's train reward ...
    lr_window: tuple[int, int] = (3, 5)   # ... against the mean over steps 3-5
    lr_tolerance: float = 0.05   # not more than 0.05 below
    # the analysis
    boot: int = 2000
    boot_seed: int = 59
    alpha: float = 0.05
    level: float = 0.95
    primary: tuple[str, str] = ("mcs-4", "noisy")
    secondary: tuple[tuple[str, str], ...] = (("mcs-4", "grpo"), ("mcs-1", "grpo"), ("noisy", "grpo"))
    # the detectable difference: (z_level + z_power) standard errors, SE = sqrt(p(1-p)(1-rho)/n + sigma_s^2)
    z_secondary: float = 2.39    # two-sided 0.05/3
    z_primary: float = 1.64      # one-sided 0.05
    z_power: float = 0.84        # 80% power


PLAN = Plan()
POLL_S = 2.0  # how often `run` looks at its processes


# ---------------------------------------------------------------------------------------------------- run


@dataclass(frozen=True)
class Job:
    name: str
    folder: Path
    args: tuple[str, ...]        # sveb's arguments, from "rl" on
    steps: int


def rate(lr: float) -> str:
    return f"{lr:g}"


def common(plan: Plan, steps: int, seed: int, eval_problems: int, lr: str, out: Path) -> list[str]:
    return ["--cuts", str(plan.cuts), "--steps", str(steps), "--seed", str(seed), "--eval-every", str(steps),
            "--eval-problems", str(eval_problems), "--train-pool", str(plan.train_pool),
            "--train-layers", str(plan.train_layers), "--batch-size", str(plan.batch_size), "--dtype", plan.dtype,
            "--engine", plan.engine, "--lr", lr, "--out", str(out)]


def screen_jobs(plan: Plan, out: Path) -> list[Job]:
    """The learning-rate screen: grpo at seed 99, 5 steps a rate, no held-out problem (--eval-problems 0)."""
    jobs = []
    for lr in plan.lr_rates:
        folder = out / "lr" / f"{plan.lr_baseline}-s{plan.lr_seed}-lr{rate(lr)}"
        jobs.append(Job(folder.name, folder, ("rl", "--baseline", plan.lr_baseline,
                                              *common(plan, plan.lr_steps, plan.lr_seed, 0, rate(lr), folder)),
                        plan.lr_steps))
    return jobs


def pilot_jobs(plan: Plan, out: Path, lr: str, runs: list[str] | None = None) -> list[Job]:
    """The 8 runs in Amendment 3's order (plan.order), or those of them named in RUNS."""
    jobs = {}
    for seed in plan.seeds:
        for arm in plan.arms:
            folder = out / "runs" / f"{arm.label}-s{seed}"
            noise = ["--noise", f"{arm.noise:g}"] if arm.noise else []
            jobs[folder.name] = Job(folder.name, folder, ("rl", "--baseline", arm.baseline, *noise,
                                                          *common(plan, plan.steps, seed, plan.eval_problems, lr,
                                                                  folder)), plan.steps)
    assert sorted(jobs) == sorted(plan.order), "plan.order names every run once"
    return [jobs[name] for name in plan.order if not runs or name in runs]


def pinned(plan: Plan, slot: int, env: dict, taskset: str | None, ncpu: int) -> tuple[list[str], dict]:
    """The command prefix and environment that put a slot's run on its own core: taskset for the process,
    VLLM_CPU_OMP_THREADS_BIND for vLLM's OpenMP threads (sveb would bind them to every core), tcmalloc preloaded.
    A machine with fewer cores than slots, or no taskset, runs them unpinned."""
    core = plan.cores[slot]
    if core >= ncpu:
        return [], env
    env = {**env, "VLLM_CPU_OMP_THREADS_BIND": str(core), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    if plan.engine == "vllm":  # what the Makefile's targets preload (`python -m sveb.engines.cpu_libs`)
        from sveb.engines.cpu_libs import preload
        env["LD_PRELOAD"] = preload(env)
        if not env["LD_PRELOAD"]:
            del env["LD_PRELOAD"]
    return ([taskset, "-c", str(core)] if taskset else []), env


def shown(plan: Plan, job: Job) -> str:
    return f"OMP_NUM_THREADS={plan.threads} sveb {shlex.join(job.args)}"


def read_rows(folder: Path) -> list[dict]:
    path = folder / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def steps_done(folder: Path) -> int:
    return max((r["step"] for r in read_rows(folder)), default=0)


def execute(plan: Plan, jobs: list[Job], sveb: list[str], say, status_every: float = 600.0) -> list[Job]:
    """Run the unfinished jobs, `plan.parallel` at a time, in order; the failed ones (no new job starts after one)."""
    pending = []
    for j in jobs:
        if steps_done(j.folder) >= j.steps:
            say(f"  {j.name}: finished ({j.steps} steps), skipped")
        else:
            pending.append(j)
    env = {**os.environ, "OMP_NUM_THREADS": str(plan.threads)}
    taskset, ncpu = shutil.which("taskset"), os.cpu_count() or 1
    running: dict[Job, tuple[subprocess.Popen, object, float, int]] = {}
    failed: list[Job] = []
    last_status = time.time()

    def term(*_):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, term)
    try:
        while pending or running:
            while pending and len(running) < plan.parallel and not failed:
                j = pending.pop(0)
                j.folder.mkdir(parents=True, exist_ok=True)
                log = open(j.folder / "run.log", "a")
                log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {shown(plan, j)}\n")
                log.flush()
                done = steps_done(j.folder)
                slot = min(set(range(plan.parallel)) - {r[3] for r in running.values()})
                prefix, slot_env = pinned(plan, slot, env, taskset, ncpu)
                running[j] = (subprocess.Popen([*prefix, *sveb, *j.args], stdout=log, stderr=subprocess.STDOUT,
                                               env=slot_env), log, time.time(), slot)
                where = f" on core {plan.cores[slot]}" if prefix or "VLLM_CPU_OMP_THREADS_BIND" in slot_env else ""
                say(f"  start {j.name}" + (f" (resuming after step {done})" if done else "")
                    + f"{where}: {shown(plan, j)}  [log: {j.folder / 'run.log'}]")
            for j, (proc, log, t0, _slot) in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                log.close()
                del running[j]
                mins = (time.time() - t0) / 60
                if rc == 0 and steps_done(j.folder) >= j.steps:
                    say(f"  done  {j.name}: {j.steps} steps in {mins:.1f} min")
                else:
                    failed.append(j)
                    say(f"  FAILED {j.name} (exit {rc}, at step {steps_done(j.folder)} of {j.steps}, {mins:.1f} min): "
                        f"see {j.folder / 'run.log'}")
            if running and time.time() - last_status >= status_every:
                last_status = time.time()
                say("  running: " + ", ".join(f"{j.name} step {steps_done(j.folder)}/{j.steps}" for j in running)
                    + f"; {len(pending)} waiting")
            if running or (pending and not failed):
                time.sleep(POLL_S)
            if failed and not running:
                break
    except KeyboardInterrupt:  # Ctrl-C (the children got it too) or SIGTERM: no run outlives this one
        for proc, _log, _, _ in running.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, log, _, _ in running.values():
            proc.wait()
            log.close()
        say("  stopped: " + ", ".join(f"{j.name} at step {steps_done(j.folder)}" for j in running)
            + "; rerun to resume")
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    return failed


def lr_choice(plan: Plan, rewards: dict[float, list[float]]) -> dict:
    """The plan's rule: the largest rate whose mean train reward over steps 3-5 is not more than 0.05 below step
    1's. rewards: {rate: [reward at step 1, 2, ...]}."""
    a, b = plan.lr_window
    rows, ok = [], []
    for lr in plan.lr_rates:
        r = rewards[lr]
        first, window = r[plan.lr_first - 1], float(sum(r[a - 1:b]) / (b - a + 1))
        drop = first - window
        good = drop <= plan.lr_tolerance + 1e-12  # rewards are multiples of 1/64: the epsilon only guards rounding
        rows.append({"lr": lr, "rewards": r, "step1": first, "mean_steps_3_5": window, "drop": drop, "ok": good})
        if good:
            ok.append(lr)
    # The plan does not say what happens when no rate passes: the smallest rate, the one least likely to collapse
    # (and the loop's default), recorded as such.
    chosen = max(ok) if ok else min(plan.lr_rates)
    return {"rule": f"the largest of {{{', '.join(rate(x) for x in plan.lr_rates)}}} whose mean train reward over "
                    f"steps {a}-{b} is not more than {plan.lr_tolerance} below step {plan.lr_first}'s "
                    f"(none passing: the smallest)",
            "seed": plan.lr_seed, "baseline": plan.lr_baseline, "steps": plan.lr_steps, "rates": rows,
            "chosen": chosen, "chosen_by": "rule" if ok else "none passed: the smallest"}


def sveb_command(arg: str | None) -> list[str]:
    if arg:
        return shlex.split(arg)
    here = Path(sys.executable).parent / "sveb"
    return [str(here)] if here.exists() else ["sveb"]


def preflight(plan: Plan) -> str | None:
    """The plan's data loads (the train pool, the held-out set) before hours of runs start: an error line or None."""
    from sveb.experiment.rl.policy import number_pools
    try:
        number_pools(plan.train_pool, plan.eval_problems)
    except Exception as e:  # noqa: BLE001 (any failure is reported in one line)
        return f"the plan's data does not load (--train-pool {plan.train_pool}, --eval-problems " \
               f"{plan.eval_problems}): {e}"
    return None


def cmd_run(args, plan: Plan = PLAN, say=print) -> int:
    out = Path(args.out)
    runs = [x for x in args.runs.split(",") if x]
    if unknown := [x for x in runs if x not in plan.order]:
        say(f"validity run: --runs {unknown[0]} is not a pilot run (one of {', '.join(plan.order)})")
        return 1
    screen = screen_jobs(plan, out)
    lr_file = out / "lr.json"
    chosen = json.loads(lr_file.read_text())["chosen"] if lr_file.exists() else None
    if args.dry_run:
        for j in screen:
            say(shown(plan, j))
        for j in pilot_jobs(plan, out, rate(chosen) if chosen is not None else "LR", runs):
            say(shown(plan, j))
        return 0
    sveb = sveb_command(args.sveb)
    if not args.sveb and (err := preflight(plan)):
        say(f"validity run: {err}")
        return 1
    out.mkdir(parents=True, exist_ok=True)
    lock = out / ".run.pid"  # two drivers would start the same runs twice
    if lock.exists() and (other := int(lock.read_text() or 0)) != os.getpid() and alive(other):
        say(f"validity run: another `run` (pid {other}) is running on {out}")
        return 1
    lock.write_text(str(os.getpid()))
    try:
        return screen_then_pilot(plan, out, screen, lr_file, chosen, sveb, args, runs, say)
    finally:
        lock.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def screen_then_pilot(plan: Plan, out: Path, screen: list[Job], lr_file: Path, chosen, sveb: list[str], args,
                      runs: list[str], say) -> int:
    say(f"learning-rate screen: {len(screen)} runs of {plan.lr_steps} steps ({plan.lr_baseline}, seed {plan.lr_seed}, "
        f"no held-out problem), {plan.parallel} at a time")
    failed = execute(plan, screen, sveb, say, status_every=args.status_every)
    if failed:
        say(f"validity run: the screen's {failed[0].name} failed; rerun to resume")
        return 1
    rewards = {}
    for lr, j in zip(plan.lr_rates, screen):
        rows = {r["step"]: r for r in read_rows(j.folder)}
        rewards[lr] = [rows[s]["reward"] for s in range(1, plan.lr_steps + 1)]
    choice = lr_choice(plan, rewards)
    choice["runs"] = [str(j.folder) for j in screen]
    if chosen is not None and chosen != choice["chosen"]:
        say(f"validity run: {lr_file} says lr {chosen}, the screen's logs give {choice['chosen']}; resolve it first")
        return 1
    lr_file.parent.mkdir(parents=True, exist_ok=True)
    lr_file.write_text(json.dumps(choice, indent=2) + "\n")
    say("learning rate: " + ", ".join(f"{rate(r['lr'])} step 1 {r['step1']:.3f}, steps 3-5 {r['mean_steps_3_5']:.3f}"
                                      f" ({'ok' if r['ok'] else 'drops'})" for r in choice["rates"])
        + f" -> {rate(choice['chosen'])} ({lr_file})")
    pilot = pilot_jobs(plan, out, rate(choice["chosen"]), runs)
    say(f"pilot: {len(pilot)} runs of {plan.steps} steps, {plan.parallel} at a time"
        + (f" (--runs: {', '.join(j.name for j in pilot)})" if runs else ""))
    failed = execute(plan, pilot, sveb, say, status_every=args.status_every)
    if failed:
        say(f"validity run: {', '.join(j.name for j in failed)} failed; rerun to resume")
        return 1
    left = [j.name for j in pilot_jobs(plan, out, rate(choice["chosen"])) if steps_done(j.folder) < j.steps]
    if left:  # --runs picked some: say what the others still need
        say(f"runs done: {', '.join(j.name for j in pilot)}; not yet run: {', '.join(left)} "
            f"(python benchmarks/validity.py run --runs ...)")
        return 0
    say(f"pilot done: python benchmarks/validity.py analyze --out {out}")
    return 0


# ---------------------------------------------------------------------------------------------------- analyze

# What the plan leaves open and how this analysis reads it (also in comments where each is computed)
OPEN = (
    "Ties in an order: Kendall's tau-b (scipy.stats.kendalltau's default); its exact permutation p "
    "(scipy.stats.permutation_test over the 4! assignments, one-sided: tau at least the observed).",
    "The clustered interval of a baseline's accuracy: the per-problem mean over its 2 runs, a t-interval over the "
    "problems (n - 1 df); the contrasts' intervals: two-sided 95% t-intervals, the primary's p one-sided.",
    "Bootstrap (seed 59, 2,000): for tau_acc each resample draws the problems with replacement (the same for every "
    "baseline), then each baseline's seed; for tau_grad each baseline's seed, then that run's steps with "
    "replacement; the gradient spread's interval resamples each run's steps. Resamples where tau is undefined "
    "(all values tied) are left out of the percentiles and counted in result.json.",
    "An interval that \"excludes 0\" in the decision rule is read as lying above 0 (the hypothesis' side); one "
    "below 0 is reported as a reversed order, never as support.",
    "The detectable difference of the rule's \"did not\": the plan's formula at the pilot's own estimates: p the "
    "mean final accuracy, rho the mean per-problem correlation of two baselines' runs at the same seed, sigma_s "
    "the pooled between-seed SD; (2.39 + 0.84) SE for the secondary contrasts, (1.64 + 0.84) SE for the primary.",
    "Learning-rate screen: `--eval-problems 0` (no held-out sample); if no rate passes, the smallest (1e-5).",
    "The noisy baseline's run folders are noisy-s0 and noisy-s1 (the plan's B-sS would clash with grpo's).",
)


class Refused(Exception):
    """analyze refuses: a one-line reason."""


@dataclass
class RunData:
    arm: Arm
    seed: int
    folder: Path
    rows: list[dict]
    complete: bool
    reward: list[float]          # train reward at steps 1..n
    grad_var: list[float]        # at steps 1..n
    start: dict[str, float]      # held-out outcomes at step 0
    final: dict[str, float]      # at the last evaluation
    final_step: int


# config.json keys that must equal the plan's (a run made with other settings is not the pilot's)
def expected_config(plan: Plan, arm: Arm, seed: int) -> dict:
    return {"baseline": arm.baseline, "noise": arm.noise, "seed": seed, "steps": plan.steps,
            "eval_every": plan.steps, "eval_problems": plan.eval_problems, "cuts": plan.cuts,
            "train_layers": plan.train_layers, "batch_size": plan.batch_size, "dtype": plan.dtype,
            "problems": plan.problems, "rollouts": plan.rollouts, "max_tokens": plan.max_tokens,
            "temperature": plan.temperature, "model": plan.model, "engine": plan.engine}


def load_run(plan: Plan, arm: Arm, seed: int, runs: Path) -> RunData | str:
    """The run's data, or why it is missing or incomplete (a string); a run that is not the plan's is refused."""
    folder = runs / f"{arm.label}-s{seed}"
    if not (folder / "config.json").exists():
        return f"{folder} is missing (no config.json)"
    cfg = json.loads((folder / "config.json").read_text())
    for k, v in expected_config(plan, arm, seed).items():
        if cfg.get(k) != v:
            raise Refused(f"{folder}: config.json has {k}={cfg.get(k)!r}, the plan {v!r}: not a pilot run")
    rows = {r["step"]: r for r in read_rows(folder) if r["step"] <= plan.steps}
    for r in rows.values():
        if "held_out_acc" in r and "held_out" not in r:
            raise Refused(f"{folder}: step {r['step']}'s evaluation has no per-problem outcomes (held_out): a log "
                          f"written before they were logged")
    n = 0
    while n + 1 in rows:
        n += 1
    evals = [s for s in sorted(rows) if s <= n and rows[s].get("held_out")]
    data = RunData(arm, seed, folder, [rows[s] for s in sorted(rows) if s <= n], complete=False,
                   reward=[rows[s]["reward"] for s in range(1, n + 1)],
                   grad_var=[rows[s]["grad_var"] for s in range(1, n + 1)],
                   start=rows[0]["held_out"] if 0 in rows and rows[0].get("held_out") else {},
                   final=rows[evals[-1]]["held_out"] if evals else {}, final_step=evals[-1] if evals else -1)
    if not data.start:
        return f"{folder} is incomplete (no step-0 evaluation yet)"
    data.complete = n == plan.steps and data.final_step == plan.steps
    return data  # an incomplete one: the caller names it


def t_stats(x, alternative: str = "two-sided", level: float = 0.95) -> dict:
    """Mean, SE, t-interval (n-1 df) and the t-test's p of a sample of per-problem values."""
    import numpy as np
    from scipy import stats
    x = np.asarray(x, float)
    n = len(x)
    m = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    if n > 1 and se > 0:
        lo, hi = (float(v) for v in stats.t.interval(level, n - 1, loc=m, scale=se))
        p = float(stats.ttest_1samp(x, 0.0, alternative=alternative).pvalue)
    else:  # every value equal (e.g. identical outcomes): the interval is the point; p 1 at 0, else 0
        lo = hi = m
        p = 1.0 if m == 0 or n < 2 else 0.0
    return {"mean": m, "se": se, "ci": [lo, hi], "df": n - 1, "p": p, "n": n}


def kendall(offline, values) -> float:
    """Kendall's tau-b (scipy's default: ties in either order count as scipy's tau-b counts them)."""
    from scipy import stats
    return float(stats.kendalltau(offline, values).statistic)


def permutation_p(offline, values) -> float:
    """The exact one-sided permutation p of tau over every assignment of the values to the baselines (4! = 24)."""
    import numpy as np
    from scipy import stats
    if not np.isfinite(kendall(offline, values)):
        return float("nan")
    res = stats.permutation_test((np.asarray(offline, float), np.asarray(values, float)),
                                 lambda a, b: stats.kendalltau(a, b).statistic, permutation_type="pairings",
                                 alternative="greater", n_resamples=np.inf, vectorized=False)
    return float(res.pvalue)


def percentiles(xs) -> list[float]:
    import numpy as np
    xs = np.asarray(xs, float)
    xs = xs[np.isfinite(xs)]
    return [float(np.percentile(xs, 2.5)), float(np.percentile(xs, 97.5))] if len(xs) else [float("nan")] * 2


def analysis(plan: Plan, runs: dict[str, list[RunData]]) -> dict:
    """Every number of the plan's analysis items 1-4 and its decision rule. runs: {arm label: its runs}."""
    import numpy as np

    from sveb.score.scoring import holm
    arms = [a for a in plan.arms if runs.get(a.label)]
    ids = sorted(runs[arms[0].label][0].final)
    for a in arms:
        for r in runs[a.label]:
            if sorted(r.final) != ids or sorted(r.start) != ids:
                raise Refused(f"{r.folder}: its held-out problems differ from {runs[arms[0].label][0].folder}'s")
    n = len(ids)
    Y = {a.label: np.array([[r.final[i] for i in ids] for r in runs[a.label]]) for a in arms}
    Y0 = {a.label: np.array([[r.start[i] for i in ids] for r in runs[a.label]]) for a in arms}
    G = {a.label: [np.asarray(r.grad_var, float) for r in runs[a.label]] for a in arms}
    res: dict = {"problems": n, "baselines": [a.label for a in arms]}

    # 1. final held-out accuracy, per run and per baseline (interval clustered by problem: the per-problem mean
    # over the baseline's runs, a t-interval over problems; with equal cluster sizes this is the cluster-robust
    # interval of the pooled mean)
    res["runs"] = [{"baseline": a.label, "seed": r.seed, "folder": str(r.folder), "complete": r.complete,
                    "steps": len(r.reward), "final_step": r.final_step,
                    "acc_start": float(np.mean([r.start[i] for i in ids])),
                    "acc_final": float(np.mean([r.final[i] for i in ids])),
                    "grad_var_mean": float(np.mean(r.grad_var)) if r.grad_var else float("nan"),
                    "reward": r.reward, "grad_var": r.grad_var} for a in arms for r in runs[a.label]]
    first = next(iter(Y0.values()))[0]
    res["start_identical"] = bool(all((y == first).all() for v in Y0.values() for y in v))
    per = {}
    for a in arms:
        accs = Y[a.label].mean(1)
        ts = t_stats(Y[a.label].mean(0), level=plan.level)
        per[a.label] = {"offline_rank": a.offline_rank, "runs": len(accs), "acc": float(accs.mean()),
                        "acc_ci": ts["ci"], "acc_seed_range": [float(accs.min()), float(accs.max())],
                        "acc_start": float(Y0[a.label].mean())}
    res["per_baseline"] = per

    # 2. paired contrasts: per-problem difference of the two baselines' correctness, each averaged over its seeds
    def contrast(x: str, y: str, alternative: str) -> dict:
        d = Y[x].mean(0) - Y[y].mean(0)
        return {"a": x, "b": y, "alternative": alternative, **t_stats(d, alternative, plan.level)}

    have = {a.label for a in arms}
    res["primary"] = contrast(*plan.primary, "greater") if set(plan.primary) <= have else None
    sec = [contrast(x, y, "two-sided") for x, y in plan.secondary if {x, y} <= have]
    for c, ph in zip(sec, holm([c["p"] for c in sec], m=len(plan.secondary))):
        c["p_holm"] = float(ph)
    res["secondary"] = sec

    # 3. gradient spread: per run its mean over steps, per baseline the mean of its runs; a 95% interval from a
    # bootstrap over steps within runs (one generator, seed 59, drawn baseline by baseline in the offline order,
    # run by run within a baseline)
    rng = np.random.default_rng(plan.boot_seed)
    for a in arms:
        gs = [g for g in G[a.label] if len(g)]
        if not gs:
            per[a.label].update(grad_var=float("nan"), grad_var_ci=[float("nan")] * 2)
            continue
        boots = np.mean([g[rng.integers(0, len(g), (plan.boot, len(g)))].mean(1) for g in gs], axis=0)
        per[a.label].update(grad_var=float(np.mean([g.mean() for g in gs])), grad_var_ci=percentiles(boots))

    # 4. rank agreement. The orders: final accuracy descending (rank 1 the most accurate), gradient spread
    # ascending (rank 1 the smallest), against the offline rank (1 the best), so tau = 1 is full agreement.
    # Ties (two baselines with equal accuracy, likely with 128 0/1 outcomes) are tau-b's, scipy's default: the
    # plan names no tie rule.
    off = np.array([a.offline_rank for a in arms], float)
    acc = np.array([per[a.label]["acc"] for a in arms])
    spread = np.array([per[a.label]["grad_var"] for a in arms])
    tau: dict = {}
    # (a): each resample draws n problems with replacement (the same problems for every baseline: they share
    # them) and then each baseline's seed; (b): each baseline's seed, then its run's steps with replacement.
    # One generator, seed 59, for each of (a) and (b).
    rng = np.random.default_rng(plan.boot_seed)
    boot_a = []
    for _ in range(plan.boot):
        idx = rng.integers(0, n, n)
        pick = [Y[a.label][rng.integers(0, len(Y[a.label]))] for a in arms]
        boot_a.append(kendall(off, [-y[idx].mean() for y in pick]))
    rng = np.random.default_rng(plan.boot_seed)
    boot_b = []
    for _ in range(plan.boot):
        vals = []
        for a in arms:
            g = G[a.label][rng.integers(0, len(G[a.label]))]
            vals.append(g[rng.integers(0, len(g), len(g))].mean() if len(g) else float("nan"))
        boot_b.append(kendall(off, vals))
    for key, vals, boot in (("acc", -acc, boot_a), ("grad", spread, boot_b)):
        t = kendall(off, vals) if len(arms) > 1 else float("nan")
        tau[key] = {"tau": t, "ci": percentiles(boot), "p_perm": permutation_p(off, vals) if len(arms) > 1
                    else float("nan"), "orders": math.factorial(len(arms)),
                    "undefined_resamples": int(np.sum(~np.isfinite(boot)))}
    tau["acc"]["order"] = [a.label for a in sorted(arms, key=lambda a: -per[a.label]["acc"])]
    tau["grad"]["order"] = [a.label for a in sorted(arms, key=lambda a: per[a.label]["grad_var"])]
    res["tau"] = tau

    # the detectable difference (plan, "What the pilot can detect"), its unknowns estimated from the pilot:
    # p the mean final accuracy of every run; rho the mean over seeds and pairs of baselines of the per-problem
    # correlation of two runs' outcomes at the same seed; sigma_s the pooled between-seed SD of a run's accuracy
    # (each baseline's sample variance of its runs' accuracies, averaged). Undefined parts count as 0 (rho: the
    # larger difference; sigma_s: only one run a baseline).
    p_all = float(np.mean([Y[a.label].mean() for a in arms]))
    cors = []
    for s in range(max(len(Y[a.label]) for a in arms)):
        for i, a in enumerate(arms):
            for b in arms[i + 1:]:
                if s < len(Y[a.label]) and s < len(Y[b.label]):
                    x, y = Y[a.label][s], Y[b.label][s]
                    if x.std() > 0 and y.std() > 0:
                        cors.append(float(np.corrcoef(x, y)[0, 1]))
    rho = float(np.mean(cors)) if cors else 0.0
    var_s = [float(np.var(Y[a.label].mean(1), ddof=1)) for a in arms if len(Y[a.label]) > 1]
    sigma_s = float(math.sqrt(np.mean(var_s))) if var_s else 0.0
    se = math.sqrt(p_all * (1 - p_all) * (1 - rho) / n + sigma_s ** 2)
    res["detectable"] = {"p": p_all, "rho": rho, "rho_pairs": len(cors), "sigma_s": sigma_s, "se": se,
                         "secondary": (plan.z_secondary + plan.z_power) * se,
                         "primary": (plan.z_primary + plan.z_power) * se}

    # the decision rule. "Its bootstrap interval excludes 0" is read in the direction of the hypothesis (the
    # interval above 0): an interval below 0 says the orders disagree, and is reported as such.
    tg, ta = tau["grad"], tau["acc"]
    holds = bool(tg["tau"] >= 1 - 1e-12 or tg["ci"][0] > 0)
    reversed_ = bool(tg["ci"][1] < 0)
    prim = res["primary"]
    predicted = bool(ta["ci"][0] > 0 and prim is not None and prim["mean"] > 0 and prim["p"] < plan.alpha)
    mdd = res["detectable"]
    within = prim is not None and len(sec) == len(plan.secondary) and all(
        -lim <= c["ci"][0] and c["ci"][1] <= lim
        for c, lim in [(prim, mdd["primary"])] + [(c, mdd["secondary"]) for c in sec])
    did_not = bool(not predicted and ta["tau"] <= 0 and within)
    res["verdict"] = {"mechanism": "holds" if holds else ("reversed" if reversed_ else "does not hold"),
                      "prediction": "predicted" if predicted else ("did not" if did_not else "inconclusive"),
                      "contrasts_within_detectable": bool(within)}
    return res


def load_all(plan: Plan, runs_dir: Path, partial: bool) -> tuple[dict[str, list[RunData]], list[str]]:
    runs: dict[str, list[RunData]] = {}
    gaps = []
    for seed in plan.seeds:
        for arm in plan.arms:
            got = load_run(plan, arm, seed, runs_dir)
            if isinstance(got, str):
                gaps.append(got)
                continue
            if not got.complete:
                gaps.append(f"{got.folder} is incomplete ({len(got.reward)} of {plan.steps} steps, last evaluation "
                            f"at step {got.final_step})")
            runs.setdefault(arm.label, []).append(got)
    if gaps and not partial:
        raise Refused(f"{gaps[0]}" + (f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else "")
                      + ": run `python benchmarks/validity.py run`, or analyze --partial")
    if not runs:
        raise Refused(f"{runs_dir}: no pilot run to analyze")
    return runs, gaps


def fmt(x: float, d: int = 3) -> str:
    return "nan" if x is None or not math.isfinite(x) else f"{x:.{d}f}"


def fmtg(x: float) -> str:  # grad_var's scale is the model's: 4 significant digits
    return "nan" if x is None or not math.isfinite(x) else f"{x:.4g}"


def ci(v, d: int = 3) -> str:
    return f"[{fmt(v[0], d)}, {fmt(v[1], d)}]"


def pv(p: float) -> str:
    return "nan" if not math.isfinite(p) else (f"{p:.2g}" if p >= 1e-4 else "<1e-4")


def report(plan: Plan, res: dict, gaps: list[str], lr: dict | None) -> str:
    per, tau, det, v = res["per_baseline"], res["tau"], res["detectable"], res["verdict"]
    L = ["# The predictive-validity pilot: result (issue 59)", ""]
    if gaps:
        L += ["**PARTIAL: not the pre-registered result.** Made with `analyze --partial` while runs are missing or "
              "incomplete:", "", *[f"- {g}" for g in gaps], "",
              "An incomplete run's accuracy is its last evaluation's (step 0 before its last step).", ""]
    L += ["Made by `python benchmarks/validity.py analyze` from the run folders in `runs/`, with the analysis and the "
          "decision rule of [plan.md](plan.md) (Amendment 1's offline order), both committed before the pilot ran. "
          f"Every number is in result.json; the curves in curves.png. {res['problems']} held-out problems.", ""]
    if lr:
        L += [f"Learning rate {rate(lr['chosen'])} ({lr['chosen_by']}; lr.json: "
              + ", ".join(f"{rate(r['lr'])}: step 1 {fmt(r['step1'])}, steps 3-5 {fmt(r['mean_steps_3_5'])}"
                          for r in lr["rates"]) + ").", ""]
    prim = res["primary"]
    mech = {"holds": "Mechanism holds", "does not hold": "Mechanism does not hold",
            "reversed": "Mechanism does not hold (the interval lies below 0: the spread orders the baselines against "
                        "the offline order)"}[v["mechanism"]]
    L += ["## Verdicts (the plan's decision rule)", "",
          f"- **{mech}**: τ_grad = {fmt(tau['grad']['tau'], 2)}, bootstrap 95% interval "
          f"{ci(tau['grad']['ci'], 2)}, exact permutation p {pv(tau['grad']['p_perm'])} (holds if τ_grad = 1 or the "
          "interval lies above 0).",
          f"- **Prediction: {v['prediction']}**: τ_acc = {fmt(tau['acc']['tau'], 2)} {ci(tau['acc']['ci'], 2)}, "
          f"permutation p {pv(tau['acc']['p_perm'])}; primary contrast mcs-4 − noisy "
          + (f"{fmt(prim['mean'])} {ci(prim['ci'])}, one-sided p {pv(prim['p'])}" if prim else "not available")
          + f"; detectable difference {fmt(det['secondary'])} (secondary contrasts), {fmt(det['primary'])} (primary)"
          + (", every contrast's interval within it" if v["contrasts_within_detectable"] else
             ", not every contrast's interval within it") + ".",
          "  Predicted: τ_acc's interval above 0 and the primary contrast positive at p < 0.05. Did not: τ_acc ≤ 0 "
          "and every contrast's interval within ± the detectable difference. Otherwise inconclusive: the effect, if "
          "any, is smaller than the detectable difference.", ""]
    L += ["## 1. Final held-out accuracy", "",
          "| run | steps | accuracy at step 0 | final accuracy | mean grad_var |", "|:--|--:|--:|--:|--:|"]
    for r in res["runs"]:
        L.append(f"| {r['baseline']}-s{r['seed']} | {r['steps']} | {fmt(r['acc_start'])} | {fmt(r['acc_final'])}"
                 + ("" if r["complete"] else f" (step {r['final_step']})") + f" | {fmtg(r['grad_var_mean'])} |")
    same = "yes" if res["start_identical"] else "NO"
    L += ["", f"Step-0 outcomes identical in every run (common random numbers): {same}.",
          "", "| baseline | offline rank | runs | final accuracy [95% CI, clustered by problem] | between-seed range |",
          "|:--|--:|--:|--:|--:|"]
    for k, b in per.items():
        L.append(f"| {k} | {b['offline_rank']} | {b['runs']} | {fmt(b['acc'])} {ci(b['acc_ci'])} | "
                 f"{ci(b['acc_seed_range'])} |")
    L += ["", "## 2. Paired contrasts (per-problem difference in correctness, seeds averaged; t over problems)", "",
          "| contrast | difference | 95% CI | p | Holm p (3) |", "|:--|--:|--:|--:|--:|"]
    if prim:
        L.append(f"| **{prim['a']} − {prim['b']}** (primary, one-sided) | {fmt(prim['mean'])} | {ci(prim['ci'])} | "
                 f"{pv(prim['p'])} | - |")
    for c in res["secondary"]:
        L.append(f"| {c['a']} − {c['b']} | {fmt(c['mean'])} | {ci(c['ci'])} | {pv(c['p'])} | {pv(c['p_holm'])} |")
    L += ["", f"Detectable difference (80% power; the plan's SE = sqrt(p(1−p)(1−ρ)/n + σ_s²) at the pilot's p = "
          f"{fmt(det['p'])}, ρ = {fmt(det['rho'], 2)} ({det['rho_pairs']} same-seed pairs), σ_s = "
          f"{fmt(det['sigma_s'])}): {fmt(det['secondary'])} at Holm's strictest level (2.39 + 0.84 SE), "
          f"{fmt(det['primary'])} for the primary (1.64 + 0.84 SE).", ""]
    L += ["## 3. Gradient spread (grad_var, tr Cov of the per-rollout gradients)", "",
          f"| baseline | offline rank | mean over steps and runs | 95% CI (bootstrap over steps, {plan.boot}, seed "
          f"{plan.boot_seed}) |", "|:--|--:|--:|--:|"]
    for k, b in per.items():
        L.append(f"| {k} | {b['offline_rank']} | {fmtg(b['grad_var'])} | "
                 f"[{fmtg(b['grad_var_ci'][0])}, {fmtg(b['grad_var_ci'][1])}] |")
    L += ["", "## 4. Rank agreement with the offline order", "",
          f"| against | τ (Kendall, tau-b) | 95% bootstrap interval ({plan.boot}, seed {plan.boot_seed}) | "
          "exact permutation p | order found |", "|:--|--:|--:|--:|:--|"]
    for key, what in (("acc", "final accuracy (descending)"), ("grad", "gradient spread (ascending)")):
        t = tau[key]
        L.append(f"| {what} | {fmt(t['tau'], 2)} | {ci(t['ci'], 2)} | {pv(t['p_perm'])} (of {t['orders']} orders) "
                 f"| {', '.join(t['order'])} |")
    L += ["", "Offline order: " + ", ".join(f"{a.label} {a.offline_rank}" for a in plan.arms) + ".", "",
          "## 5. Learning curves", "",
          "![train reward per step, held-out accuracy at the start and the end](curves.png)", "",
          "## Details the plan leaves open, as chosen (before any run)", "", *[f"- {c}" for c in OPEN], ""]
    return "\n".join(L)


def plot(runs: dict[str, list[RunData]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    colours = {}
    for label, rs in runs.items():
        for r in rs:
            style = ("-", "--", ":", "-.")[r.seed % 4]
            line, = a.plot(range(1, len(r.reward) + 1), r.reward, style, color=colours.get(label),
                           label=f"{label}-s{r.seed}")
            colours.setdefault(label, line.get_color())
            ends = [sum(r.start.values()) / len(r.start), sum(r.final.values()) / len(r.final)]
            b.plot([0, r.final_step], ends, style, marker="o", color=colours[label], label=f"{label}-s{r.seed}")
    a.set(xlabel="step", ylabel="train reward (mean of the step's rollouts)", title="Train reward")
    b.set(xlabel="step", ylabel="held-out accuracy", title="Held-out accuracy, start and end")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def cmd_analyze(args, plan: Plan = PLAN, say=print) -> int:
    out = Path(args.out)
    try:
        runs, gaps = load_all(plan, out / "runs", args.partial)
        res = analysis(plan, runs)
    except Refused as e:
        say(f"validity analyze: {e}")
        return 1
    lr = json.loads((out / "lr.json").read_text()) if (out / "lr.json").exists() else None
    res["partial"] = gaps
    res["lr"] = lr
    res["plan"] = asdict(plan)
    (out / "result.json").write_text(json.dumps(jsonable(res), indent=2) + "\n")
    (out / "result.md").write_text(report(plan, res, gaps, lr))
    plot(runs, out / "curves.png")
    v = res["verdict"]
    say(f"{out / 'result.md'}: mechanism {v['mechanism']}, prediction {v['prediction']}"
        + (" (PARTIAL)" if gaps else ""))
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the learning-rate screen, then the 8 pilot runs (resumable)")
    r.add_argument("--out", default="results/validity", help="lr.json, lr/ and runs/ go here")
    r.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    r.add_argument("--sveb", default=None, help="the command that stands for `sveb` (default: the sveb beside this "
                                                "Python; tests: a stand-in); skips the data check")
    r.add_argument("--runs", default="", help="comma-separated pilot runs to run (after the screen), e.g. "
                                             "noisy-s0,noisy-s1 (default: all 8)")
    r.add_argument("--status-every", type=float, default=600.0, help="seconds between progress lines")
    a = sub.add_parser("analyze", help="result.md, result.json and curves.png from the run folders")
    a.add_argument("--out", default="results/validity", help="reads OUT/runs (and OUT/lr.json), writes here")
    a.add_argument("--partial", action="store_true", help="analyze the runs so far, marked partial")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, plan: Plan = PLAN, say=print) -> int:
    args = parse(argv)
    return (cmd_run if args.cmd == "run" else cmd_analyze)(args, plan, say)


if __name__ == "__main__":
    sys.exit(main())
