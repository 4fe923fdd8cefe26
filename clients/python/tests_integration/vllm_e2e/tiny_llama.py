"""A tiny random-initialised Llama written in Hugging Face format, for end-to-end engine tests.

Owns: the model directory an engine loads by path (no hub): ``config.json``,
``generation_config.json``, ``model.safetensors``, ``tokenizer.json`` and ``tokenizer_config.json``.

Thread model: none; ``write_tiny_llama`` is a plain function run once per test class, as
``python -m tests_integration.vllm_e2e.tiny_llama DIR [SEED]`` under the engine's interpreter
(it needs torch, transformers and tokenizers).

Invariants: the same ``seed`` and shape give byte-identical weight files (a fixed torch seed on a
CPU generator, float32 init then a cast); nothing is downloaded. The tokenizer is byte-level BPE
with no merges: the 256 byte symbols, then ``<s>`` and ``</s>``, then unused fillers up to the
model's ``vocab_size``, so every id the model can sample decodes.

Design note: the default shape (2 layers, hidden 128, 4 query heads, 2 KV heads, head_dim 32,
vocab 384) is the smallest the vLLM CPU attention backend takes (head sizes 32, 64, 80, ...;
kernel block sizes a multiple of 32). Weights are drawn fan-in scaled (unit-variance outputs,
not Hugging Face's std 0.02) and the LM head scaled so logits have std ~``logit_std``: peaked
distributions (top-1 logprob around -0.5, not -ln 384), so generations differ from prompt to
prompt. bfloat16 logits can still tie (seen: two ids at the same logprob); a tie resolves the same
way every run, and the parity checks compare logprobs bit for bit, which any KV difference
changes. 790 KB of bfloat16 weights; ~6 s to write, nearly all of it importing torch.
"""

import json
import os
import sys

BYTE_SYMBOLS = 256
SPECIALS = ("<s>", "</s>")


def _bytes_to_unicode() -> dict:
    """GPT-2's reversible byte -> printable character map (the ByteLevel pre-tokenizer's alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def build_tokenizer(vocab_size: int):
    """A ``PreTrainedTokenizerFast`` over a merge-free byte-level BPE of exactly ``vocab_size`` ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < BYTE_SYMBOLS + len(SPECIALS):
        raise ValueError(f"vocab_size {vocab_size} < {BYTE_SYMBOLS + len(SPECIALS)}")
    vocab = {ch: i for i, ch in enumerate(sorted(_bytes_to_unicode().values()))}
    for token in SPECIALS:
        vocab[token] = len(vocab)
    while len(vocab) < vocab_size:
        vocab[f"<unused_{len(vocab)}>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIALS))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", model_max_length=2048)


def write_tiny_llama(out_dir: str, seed: int = 0, dtype: str = "bfloat16", layers: int = 2, hidden: int = 128,
                     heads: int = 4, kv_heads: int = 2, vocab_size: int = 384, max_positions: int = 2048,
                     logit_std: float = 4.0) -> str:
    """Write the model into ``out_dir`` (created if missing) and return it."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    os.makedirs(out_dir, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=max_positions, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        initializer_range=0.02, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=None, dtype=dtype)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):  # a fixed order, independent of init hooks
            if param.dim() == 1:
                param.fill_(1.0)  # RMSNorm weights
                continue
            std = 1.0 if "embed_tokens" in name else param.shape[-1] ** -0.5  # unit-variance outputs
            if name == "lm_head.weight":
                std *= logit_std
            param.copy_(torch.randn(param.shape, generator=generator) * std)
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(out_dir, safe_serialization=True)
    GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                     do_sample=False).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "tiny_llama.json"), "w") as f:
        json.dump({"seed": seed, "dtype": dtype, "logit_std": logit_std}, f)
    return out_dir


if __name__ == "__main__":
    print(write_tiny_llama(sys.argv[1], seed=int(sys.argv[2]) if len(sys.argv) > 2 else 0))
