"""Whole experiments: `sveb demo` (builds, every estimator, the report) and Table 4 (benchmarks/table4.py), both
on the shared runner (sveb.experiment.runner) and presets (sveb.experiment.presets); the RL validity loop
(sveb.experiment.rl, `sveb rl`)."""
