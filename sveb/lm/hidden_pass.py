"""The forward pass behind sveb.lm.hidden: a problem group's rollouts share one prompt, so the prompt is passed
once and its keys and values serve every response (causal attention gives the prompt the same states whatever
follows it), and the responses go in batches chosen so padding costs little. On Table 4's builds a group's
prompt is 34-66% of its tokens and a plain right-padded pass computed 1.6-2.7x the real tokens
(benchmarks/hidden_pass.py measures both)."""

from __future__ import annotations

import copy

import numpy as np

# What one more forward call costs, in padded token positions: on a CPU a call's fixed cost is a few tokens'
# worth, on a GPU (kernel launches) thousands, so there few large batches win and here tight ones.
CALL_TOKENS = {"cpu": 32, "cuda": 4096}


def call_tokens(device) -> int:
    """CALL_TOKENS for a torch device (or its name); other device types are priced as a CPU."""
    import torch
    return CALL_TOKENS.get(torch.device(device).type, CALL_TOKENS["cpu"])


def plan_batches(lengths: list[int], prompt: int, budget: int, per_call: int) -> list[list[int]]:
    """Indices of `lengths` (responses of one prompt) in batches, each sorted by length: the partition of the
    sorted lengths that minimises padded positions (n x the batch's longest) plus `per_call` per batch, with
    n x (prompt + longest) <= budget where possible (a single longer row goes alone). Zero lengths need no pass
    and are left out."""
    order = sorted((i for i, t in enumerate(lengths) if t > 0), key=lambda i: lengths[i])
    n = len(order)
    best = [0.0] + [np.inf] * n  # best[j]: cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest = lengths[order[j - 1]]
        for i in range(j - 1, -1, -1):  # the batch is sorted rows i..j-1
            if (j - i) * (prompt + longest) > budget and j - i > 1:
                break
            cost = best[i] + (j - i) * longest + per_call
            if cost < best[j]:
                best[j], cut[j] = cost, i
    out, j = [], n
    while j > 0:
        out.append(order[cut[j]:j])
        j = cut[j]
    return out[::-1]


def run(model, device, ids, mask, cache, every_layer: bool):
    import torch
    with torch.no_grad():
        # the body only: the LM head's logits would cost tokens x vocab floats for nothing
        return model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device), past_key_values=cache,
                                use_cache=True, output_hidden_states=every_layer)


def group_pass(model, device, prompt: list[int], rows: list[dict], taps: list[tuple], budget: int,
               store, sink=None) -> dict[tuple, dict[int, np.ndarray]]:
    """{tap: {rollout_idx: store(states)}} for rollouts of one prompt; a tap is ("resp", layer): the layer at
    the response positions, or ("full", layer): at every position of prompt + response. Layers index the
    model's `hidden_states` tuple (-1: the final normed output). With `sink`, each rollout's states (a device
    tensor) go to sink(tap, rollout_idx, states) as soon as its batch is done, and the dict stays empty."""
    import torch
    layer_of = lambda res, k: res.last_hidden_state if k == -1 else res.hidden_states[k]  # noqa: E731
    every = any(k != -1 for _, k in taps)  # the tuple of every layer only when a tap needs one below the last
    dtype = next(model.parameters()).dtype
    p = len(prompt)
    head, first = {}, None
    if p:
        ids = torch.tensor([prompt])
        first = run(model, device, ids, torch.ones_like(ids), None, every)
        head = {k: layer_of(first, k)[0] for kind, k in taps if kind == "full"}
    out: dict[tuple, dict[int, np.ndarray]] = {tap: {} for tap in taps}

    def keep(tap, idx, h):  # stored at once (to host memory): a group's states never pile up on the device
        h = torch.cat([head[tap[1]], h]) if tap[0] == "full" and p else h
        if sink is not None:
            sink(tap, idx, h)
        else:
            out[tap][idx] = store(h)

    empty = torch.zeros((0, model.config.hidden_size), dtype=dtype, device=device)
    lengths = [len(r["response_token_ids"]) for r in rows]
    for r, t in zip(rows, lengths):
        if t == 0:  # no response: nothing to pass
            for tap in taps:
                keep(tap, r["rollout_idx"], empty)
    for batch in plan_batches(lengths, p, budget, call_tokens(device)):
        width = max(lengths[i] for i in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), p + width), dtype=torch.long)
        mask[:, :p] = 1
        for b, i in enumerate(batch):  # right padding: causal attention keeps real positions exact
            ids[b, :lengths[i]] = torch.tensor(list(rows[i]["response_token_ids"]), dtype=torch.long)
            mask[b, p:p + lengths[i]] = 1
        cache = None
        if p:
            cache = copy.deepcopy(first.past_key_values)
            cache.batch_repeat_interleave(len(batch))
        res = run(model, device, ids, mask, cache, every)
        for tap in taps:
            hs = layer_of(res, tap[1])
            for b, i in enumerate(batch):
                keep(tap, rows[i]["rollout_idx"], hs[b, :lengths[i]])
    return out
