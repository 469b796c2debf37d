"""A tiny byte-level BPE tokenizer (BOS, ChatML markers with a chat template, Qwen PRM's separator, Math-Shepherd's
step tag) and a tiny Qwen2 config: the PRMs and judges of tests/test_prm.py and tests/test_judge.py."""

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_tokenizer(path):
    """A byte-level BPE tokenizer with a BOS, ChatML's markers, Qwen PRM's separator and Math-Shepherd's tag."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["What is 3 + 4? steps: 1 0 1 1. The answer is \\boxed{7}.", "+ - + - Yes No yes no"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<s>", "<pad>", "<|im_start|>", "<|im_end|>", "<extra_0>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_tokens(["ки"])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", pad_token="<pad>", eos_token="<|im_end|>")
    fast.chat_template = CHATML
    fast.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def qwen_cfg(vocab, **kw):
    return Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, pad_token_id=1, **kw)
