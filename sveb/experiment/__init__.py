"""Whole experiments: `sveb demo` (a build, every estimator, the report)."""
