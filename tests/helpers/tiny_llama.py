"""A tiny random Llama saved to disk (hidden states and critics are real and take seconds), and token rows."""

import numpy as np


def tiny_llama(path, layers=2, vocab=256):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    LlamaForCausalLM(cfg).save_pretrained(path)
    return str(path)


def seqs_two_problems(n=12, seed=0):
    """Problem A (prompt 'A...') always succeeds, B never: a critic can learn this from the prompt."""
    from sveb.lm.critic import make_seq
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a = i % 2 == 0
        prompt = [65 if a else 66] * 3 + [10]
        resp = rng.integers(97, 123, rng.integers(3, 9)).tolist()
        out.append(make_seq(("t", i), prompt, resp, 1.0 if a else 0.0))
    return out


def rollouts(n=5, seed=0):
    """n rollout rows of random token ids (prompt 4 + i, response 3 + 2i tokens), rewards alternating 0, 1."""
    rng = np.random.default_rng(seed)
    return [{"rollout_idx": i, "prompt_token_ids": rng.integers(1, 200, 4 + i).tolist(),
             "response_token_ids": rng.integers(1, 200, 3 + 2 * i).tolist(), "reward": float(i % 2)}
            for i in range(n)]
