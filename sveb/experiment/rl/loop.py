"""The RL loop: sample G rollouts per problem through an SVEB engine, cut states as a build does, value them with a
baseline (held-out), turn values into per-token advantages, and take one REINFORCE step (sveb.lm.policy_update).

Every random choice derives from (seed, step, ids), so a run resumed from its newest checkpoint draws what the
uninterrupted run would have drawn. The policy that is trained is `model`; with the hf engine it is the engine's own
model object, so an update is what the next step samples from (nothing to reload); an engine that samples from a
copy (vLLM, sveb.experiment.rl.policy) has `refresh(model)`, called after each update and after a resume.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sveb.core.config import SamplingConfig, derive_seed
from sveb.data_builders import domain_module
from sveb.engines import Engine, Request
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.experiment.rl import checkpoint
from sveb.experiment.rl.advantages import held_out_mean, token_advantages
from sveb.experiment.rl.baselines import Baseline
from sveb.rewards import reward
from sveb.sample.cuts import single_cuts


@dataclass(frozen=True)
class RLConfig:
    baseline: str = "grpo"
    baseline_params: tuple[tuple[str, str], ...] = ()
    noise: float = 0.0              # N(0, noise^2) added to every baseline value (a worse baseline on purpose)
    steps: int = 20
    seed: int = 0
    problems: int = 8               # problems per step
    rollouts: int = 8               # G per problem
    cuts: int = 2                   # cut states per rollout
    max_tokens: int = 200
    temperature: float = 0.7
    train_layers: int = 4           # top decoder layers trained; 0 = every parameter (2 and 4 cost the same)
    lr: float = 1e-5
    max_grad_norm: float = 1.0
    eval_every: int = 5
    eval_problems: int = 64
    checkpoint_every: int = 1
    dtype: str = "float32"          # the concrete compute dtype (autocast bf16 over fp32 weights, or fp32)
    batch_size: int = 8             # hf engine batch: it seeds per batch, so this changes the samples
    engine: str = "hf"              # hf (its model is the policy) | vllm (reloads the new weights in place each step)
    model: str = "smollm2-135m"


def rl_seed(cfg: RLConfig, *parts) -> int:
    return derive_seed(cfg.seed, "rl", *parts)


def pick(cfg: RLConfig, step: int, pool: Sequence[dict]) -> list[dict]:
    """The step's problems: a seeded draw without replacement from the train pool."""
    return random.Random(rl_seed(cfg, "problems", step)).sample(list(pool), min(cfg.problems, len(pool)))


def prompt_ids(engine: Engine, p: dict) -> tuple[int, ...]:
    return tuple(engine.tokenizer.encode_chat(domain_module(p["domain"]).prompt(p)))


def rollouts(engine: Engine, cfg: RLConfig, step: int, problems: Sequence[dict]) -> list[ProblemGroup]:
    """G rollouts of each problem, graded, as the groups estimators read."""
    params = SamplingConfig(temperature=cfg.temperature, max_tokens=cfg.max_tokens)
    reqs, meta = [], []
    for p in problems:
        ids = prompt_ids(engine, p)
        for j in range(cfg.rollouts):
            reqs.append(Request(ids, rl_seed(cfg, "rollout", step, p["problem_id"], j)))
            meta.append((p, j, ids))
    outs = engine.generate(reqs, params, desc=f"step {step}: rollouts")
    groups: dict[str, list[Rollout]] = {}
    for (p, j, ids), o in zip(meta, outs):
        text = engine.tokenizer.decode(o.token_ids)
        groups.setdefault(p["problem_id"], []).append(Rollout(j, ids, tuple(o.token_ids), text, reward(text, p)))
    return [ProblemGroup(p, tuple(groups[p["problem_id"]]), tuple(groups[p["problem_id"]])) for p in problems]


def cut_states(engine: Engine, cfg: RLConfig, step: int, g: ProblemGroup) -> list[State]:
    """cfg.cuts states of each rollout, cut by the build's rule (t uniform in [1, T-1]), seeded per rollout."""
    out = []
    pid = g.problem["problem_id"]
    for r in g.rollouts:
        if len(r.response_token_ids) < 2:
            continue
        row = {"rollout_idx": r.rollout_idx, "response_token_ids": r.response_token_ids}
        for _, t in single_cuts(random.Random(rl_seed(cfg, "cuts", step, pid, r.rollout_idx)), [row], cfg.cuts):
            out.append(State(f"{pid}-{r.rollout_idx}-{t}", pid, r.rollout_idx, t,
                             engine.tokenizer.decode(r.response_token_ids[:t])))
    return out


def with_extra(engine: Engine, cfg: RLConfig, step: int, g: ProblemGroup, states: list[State], k: int) -> list[State]:
    """States with k fresh continuations each (what MCS@k reads), each with the budget its rollout had left."""
    if not k or not states:
        return states
    params = SamplingConfig(temperature=cfg.temperature, max_tokens=cfg.max_tokens)
    reqs = []
    for s in states:
        r = g.rollout(s.rollout_idx)
        for j in range(k):
            reqs.append(Request(r.prompt_token_ids + r.response_token_ids[:s.t],
                                rl_seed(cfg, "extra", step, s.state_id, j), cfg.max_tokens - s.t))
    outs = engine.generate(reqs, params, desc=f"step {step}: continuations")
    res = []
    for i, s in enumerate(states):
        prefix = g.rollout(s.rollout_idx).response_token_ids[:s.t]
        rw = tuple(reward(engine.tokenizer.decode(prefix + tuple(o.token_ids)), g.problem)
                   for o in outs[i * k:(i + 1) * k])
        res.append(dataclasses.replace(s, extra_rewards=rw))
    return res


def advantages(engine: Engine, cfg: RLConfig, step: int, groups: list[ProblemGroup], base: Baseline):
    """Per rollout (group index, rollout, per-token advantages); held-out throughout."""
    out = []
    if not base.cuts:  # none: the batch's held-out mean
        everyone = [r.reward for g in groups for r in g.rollouts]
        i = 0
        for gi, g in enumerate(groups):
            for r in g.rollouts:
                v0 = base.jitter(np.array([held_out_mean(everyone, i)]), rl_seed(cfg, "noise", step, gi, i))[0]
                out.append((gi, r, token_advantages(r.reward, len(r.response_token_ids), [], v0)))
                i += 1
        return out
    for gi, g in enumerate(groups):
        states = with_extra(engine, cfg, step, g, cut_states(engine, cfg, step, g), base.extra)
        values = base.values(g, states) if states else np.zeros(0)
        rewards = [r.reward for r in g.rollouts]
        for i, r in enumerate(g.rollouts):
            mine = [(s.t, v) for s, v in zip(states, values) if s.rollout_idx == r.rollout_idx]
            vals = base.jitter(np.array([held_out_mean(rewards, i)] + [v for _, v in mine]),
                               rl_seed(cfg, "noise", step, g.problem["problem_id"], r.rollout_idx))
            cuts = [(t, v) for (t, _), v in zip(mine, vals[1:])]
            out.append((gi, r, token_advantages(r.reward, len(r.response_token_ids), cuts, vals[0])))
    return out


# The held-out samples' seeds do not depend on the run's seed: every evaluation of every run (any baseline, any
# seed) draws problem p's sample from the same seed, so two runs' outcomes on p differ only by their policies
# (common random numbers, results/validity/plan.md). Equal to rl_seed(cfg, "eval", pid) of a seed-0 run.
EVAL_SEED = 0


def held_out_outcomes(engine: Engine, cfg: RLConfig, pool: Sequence[dict]) -> dict[str, float]:
    """{problem_id: reward} of one sample per eval problem; the same seeds at every evaluation and in every run."""
    probs = list(pool)[:cfg.eval_problems]
    if not probs:
        return {}
    ids = [p["problem_id"] for p in probs]
    if len(set(ids)) < len(ids):
        raise ValueError("held-out problems with the same problem_id: their outcomes could not be told apart")
    params = SamplingConfig(temperature=cfg.temperature, max_tokens=cfg.max_tokens)
    outs = engine.generate([Request(prompt_ids(engine, p), derive_seed(EVAL_SEED, "rl", "eval", p["problem_id"]))
                            for p in probs], params, desc="held-out accuracy")
    return {p["problem_id"]: float(reward(engine.tokenizer.decode(o.token_ids), p)) for o, p in zip(outs, probs)}


def held_out_accuracy(engine: Engine, cfg: RLConfig, pool: Sequence[dict]) -> float:
    """Mean reward of one sample per eval problem (held_out_outcomes); NaN without eval problems."""
    return evaluation(engine, cfg, pool)["held_out_acc"]


def evaluation(engine: Engine, cfg: RLConfig, pool: Sequence[dict]) -> dict:
    """A log row's evaluation fields: held_out_acc (the mean) and held_out ({problem_id: reward}, what the
    validity analysis pairs by problem; logs written before it have only the mean)."""
    got = held_out_outcomes(engine, cfg, pool)
    return {"held_out_acc": float(np.mean(list(got.values()))) if got else float("nan"), "held_out": got}


def run(cfg: RLConfig, out: Path, engine: Engine, model, train: Sequence[dict], held_out: Sequence[dict],
        console=None, stop_after: int | None = None) -> list[dict]:
    """Steps latest+1 .. cfg.steps (or stop_after), checkpointing as it goes; the log's rows."""
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sveb.lm.policy_update import PolicyUpdate, Sample
    out = Path(out)
    checkpoint.check_config(out, dataclasses.asdict(cfg))
    base = Baseline(cfg.baseline, dict(cfg.baseline_params), cfg.noise)
    upd = PolicyUpdate(model, cfg.train_layers, cfg.lr, max_grad_norm=cfg.max_grad_norm, scale=cfg.max_tokens,
                       amp="bfloat16" if cfg.dtype == "bfloat16" else None)
    start = checkpoint.latest_step(out)
    refresh = getattr(engine, "refresh", None)  # an engine that samples from a copy of the policy reloads it
    if start:
        upd.load_state_dict(checkpoint.load(out, start))
        if refresh:
            refresh(model)
    rows = checkpoint.read_log(out, start)
    last = min(cfg.steps, stop_after) if stop_after else cfg.steps
    console = console or Console(stderr=True)
    # the newest evaluation's accuracy: a resume after a step without one (eval_every > 1) reads back further
    acc = next((r["held_out_acc"] for r in reversed(rows) if "held_out_acc" in r), float("nan"))
    with Progress(TextColumn("rl {task.fields[baseline]}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("reward {task.fields[reward]:.3f}  held-out acc {task.fields[acc]:.3f}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("rl", total=cfg.steps, completed=start, baseline=cfg.baseline, reward=float("nan"),
                            acc=acc)
        if not rows:
            with torch.no_grad():
                row0 = {"step": 0, **evaluation(engine, cfg, held_out)}
            rows.append(row0)
            acc = row0["held_out_acc"]
            bar.update(task, acc=acc)
        for step in range(start + 1, last + 1):
            t0 = time.time()
            with torch.no_grad():
                groups = rollouts(engine, cfg, step, pick(cfg, step, train))
                t1 = time.time()
                adv = advantages(engine, cfg, step, groups, base)
            t2 = time.time()
            torch.manual_seed(rl_seed(cfg, "update", step))
            stats = upd.step([Sample(r.prompt_token_ids, r.response_token_ids, a) for _, r, a in adv])
            t3 = time.time()
            if refresh:
                refresh(model)
            row = {"step": step, "reward": float(np.mean([r.reward for g in groups for r in g.rollouts])),
                   "adv_abs": float(np.mean([np.abs(a).mean() for _, _, a in adv if len(a)] or [0.0])),
                   **{k: stats[k] for k in ("loss", "grad_var", "grad_norm")},
                   "seconds": {"sample": round(t1 - t0, 2), "baseline": round(t2 - t1, 2), "update": round(t3 - t2, 2),
                               **({"reload": round(time.time() - t3, 2)} if refresh else {})}}
            t4 = time.time()
            if step % cfg.eval_every == 0 or step == cfg.steps:
                with torch.no_grad():
                    row.update(evaluation(engine, cfg, held_out))
                acc = row["held_out_acc"]
                row["seconds"]["eval"] = round(time.time() - t4, 2)
            rows.append(row)
            if step % cfg.checkpoint_every == 0 or step == last:
                checkpoint.save(out, step, upd.state_dict(), {"step": step})
                checkpoint.write_log(out, rows)
            bar.update(task, completed=step, reward=row["reward"], acc=acc)
    return rows
