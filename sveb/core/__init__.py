"""Shared vocabulary: errors, the build config, table schemas, records, signals, cost, model names."""
