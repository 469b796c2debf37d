"""The RL validity pilot's loop (issue 59): does a better value baseline make a better RL run? `loop` samples,
cuts, values (held-out) and updates; `advantages` the per-token math; `baselines` the estimator wiring;
`checkpoint` the run's folder; `policy` the hf engine's model as the trained policy."""

from sveb.experiment.rl.loop import RLConfig, run

__all__ = ["RLConfig", "run"]
