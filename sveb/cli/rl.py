"""`sveb rl`: the predictive-validity pilot's RL loop (issue 59) on the number domain, with an SVEB estimator as the
value baseline."""

from __future__ import annotations

from pathlib import Path

import typer

from sveb.cli.common import MODEL, app, console, out


@app.command()
def rl(
    baseline: str = typer.Option("grpo", help="The value baseline at the cut states: none (the batch's held-out mean), "
                                 "grpo, mcs-1..mcs-4, or a plugin estimator that reads only the group."),
    param: list[str] = typer.Option([], "--param", "-P", help="The baseline estimator's parameter key=value; "
                                    "repeatable."),
    noise: float = typer.Option(0.0, help="Add N(0, noise^2) to every baseline value (a worse baseline on purpose)."),
    steps: int = typer.Option(20, help="Policy updates (a rerun with more steps extends the run)."),
    seed: int = typer.Option(0, help="Seeds every draw: problems, rollouts, cuts, continuations, noise."),
    out_dir: Path = typer.Option(..., "--out", help="The run's folder: config, log.jsonl, the newest checkpoint. "
                                 "A rerun resumes from the checkpoint; other settings are refused."),
    problems: int = typer.Option(8, help="Problems per step."),
    rollouts: int = typer.Option(8, help="Rollouts per problem (G)."),
    cuts: int = typer.Option(2, help="Cut states per rollout (t uniform in [1, T-1], as a build cuts)."),
    max_tokens: int = typer.Option(200, help="Token budget of a rollout."),
    train_layers: int = typer.Option(4, help="Top decoder layers trained (0: every parameter; 2 and 4 cost the same "
                                     "here, the forward through the frozen layers dominates)."),
    lr: float = typer.Option(1e-5, help="AdamW learning rate."),
    eval_every: int = typer.Option(5, help="Steps between held-out accuracy evaluations (also after the last)."),
    eval_problems: int = typer.Option(64, help="Held-out problems (test split), one sample each, same seeds each "
                                      "time."),
    train_pool: int = typer.Option(371, help="Train-split problems the steps draw from (371: the whole seed-0 slot "
                                   "of the builtin number train split, its level mix kept)."),
    batch_size: int = typer.Option(8, help="Sequences a generate call of the hf engine takes (8 sampled 1.5x more "
                                   "tokens a CPU-second than 64 on a 2-core EPYC: less padding). Changes the samples."),
    engine: str = typer.Option("hf", help="hf: its model is the policy, nothing reloads | vllm: reloads the new "
                               "weights (written to OUT/weights) in place after every update."),
    dtype: str = typer.Option("auto", help="auto (bf16 on a CPU with native bf16, else fp32) | bfloat16 | float32."),
    model: str = MODEL,
):
    """Train the policy with REINFORCE, advantages R - V(last cut state), V from the chosen baseline under the
    held-out protocol; sampling through the hf engine, whose model is the policy. Prints step, reward and held-out
    accuracy; writes OUT/log.jsonl."""
    from sveb.core import signals
    from sveb.core.device import pick_dtype
    from sveb.evaluate import params_dict
    from sveb.experiment.rl import RLConfig, run
    from sveb.experiment.rl.policy import hf_policy, number_pools
    signals.install()
    dt = pick_dtype(dtype)
    cfg = RLConfig(baseline=baseline, baseline_params=tuple(sorted(params_dict(param).items())), noise=noise,
                   steps=steps, seed=seed, problems=problems, rollouts=rollouts, cuts=cuts, max_tokens=max_tokens,
                   train_layers=train_layers, lr=lr, eval_every=eval_every, eval_problems=eval_problems, dtype=dt,
                   batch_size=batch_size, engine=engine, model=model)
    from sveb.experiment.rl.baselines import Baseline
    Baseline(cfg.baseline, dict(cfg.baseline_params), cfg.noise)  # a bad name fails before the model loads
    train, held = number_pools(train_pool, eval_problems)
    if engine not in ("hf", "vllm"):
        raise typer.BadParameter(f"unknown engine '{engine}' (hf or vllm)", param_hint="--engine")
    if engine == "vllm":
        from sveb.experiment.rl.policy import vllm_policy
        sampler, policy = vllm_policy(model, dt, str(out_dir / "weights"))
    else:
        sampler, policy = hf_policy(model, dt, batch_size)
    try:
        rows = run(cfg, out_dir, sampler, policy, train, held, console=console)
    finally:
        if hasattr(sampler, "close"):  # vLLM's engine: stopped now rather than at exit
            sampler.close()
    last = next((r for r in reversed(rows) if "held_out_acc" in r), {})
    out.print(f"{out_dir}: {rows[-1]['step']} steps, held-out accuracy {last.get('held_out_acc', float('nan')):.3f} "
              f"(step {last.get('step', '-')}), compute dtype {dt}")


@app.command("rl-export")
def rl_export(
    run_dir: Path = typer.Argument(..., help="A `sveb rl --out` folder."),
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the policy (config.json, fp32 safetensors, "
                                 "tokenizer with its chat template, sveb_policy.json)."),
    step: int | None = typer.Option(None, help="The checkpoint's step (default: the newest; only the newest is "
                                       "kept)."),
):
    """Write an RL run's policy as a model folder: the run's base model with the checkpoint's trained parameters.
    `sveb build --model OUT` and `sveb eval --model OUT` take it like any local model; sveb_policy.json records the
    run, the step, the base model and the checkpoint's sha256."""
    from sveb.experiment.rl.export import checkpoint_file, export_policy, run_config
    from sveb.store import check_writable
    run_config(run_dir)  # a bad run folder or a missing checkpoint fails before the model loads
    checkpoint_file(run_dir, step)
    check_writable(out_dir, "--out")
    rec = export_policy(run_dir, out_dir, step)
    out.print(f"{run_dir} step {rec['step']} -> {out_dir} (base {rec['base_model']}, {rec['trained_parameters']} "
              f"trained tensors, checkpoint sha256 {rec['checkpoint_sha256'][:16]})")
