"""What the RL tests share: a tiny random Llama in memory (tied embeddings, as SmolLM2) and number problems."""

from sveb.data_builders import make_problem


def tiny_llama(layers=2, vocab=256):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).float().eval()


def problems(n, offset=0):
    return [make_problem("number", "test", f"What is {a} + {a + 1}?", str(2 * a + 1), "math")
            for a in range(1 + offset, 1 + offset + n)]
