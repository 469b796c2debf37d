"""Statistics: per-estimator scores, pooled views, paired tests and Holm families, power."""
