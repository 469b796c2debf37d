"""Sampling engines behind one Protocol, on token ids, and their registry (sveb.engines.registry).

A request is (prompt token ids, seed) and yields one completion; n samples of a prompt are n
requests with n derived seeds, so each sample is reproducible on its own. A state's continuation
is requested with prompt ids + its first t response ids: text is never re-tokenised.
"""

from sveb.engines.base import (
    Completion,
    Engine,
    EngineError,
    EngineOptions,
    HFTokenizer,
    Request,
    Tokenizer,
    model_context,
)
from sveb.engines.registry import (
    BUILTIN,
    ENGINES,
    GROUP,
    EngineEntry,
    entry,
    fingerprint_key,
    make_engine,
    model_free,
    own_tokenizer,
    start,
    uses_model,
)

__all__ = ["BUILTIN", "ENGINES", "GROUP", "Completion", "Engine", "EngineEntry", "EngineError", "EngineOptions",
           "HFTokenizer", "Request", "Tokenizer", "entry", "fingerprint_key", "make_engine", "model_context",
           "model_free", "own_tokenizer", "start", "uses_model"]
