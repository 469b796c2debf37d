"""SVEB: the State Value Estimation Benchmark.

Importing this package must stay cheap: torch, vllm and transformers are imported
only inside the functions that need them.
"""

__version__ = "0.1.0"
