"""A tiny hand-written Llama GGUF (the gguf package's GGUFWriter), for the tests of GGUF files in."""

from pathlib import Path

import numpy as np

CHAT_TEMPLATE = "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}"

D_MODEL, N_HEADS, N_KV_HEADS, FFN, N_LAYERS = 16, 2, 1, 32, 2
TOKENS = ["<|endoftext|>", "<s>", "</s>", *"abcdefghijklm", "ab", "cd"]
MERGES = ["a b", "c d"]


def write_gguf(path: Path, *, architecture: str = "llama", tokens: list[str] = TOKENS, vocab: int = len(TOKENS),
               quantization: "GGMLQuantizationType | None" = None, seed: int = 0) -> Path:
    """A tiny Llama GGUF at `path`: N_LAYERS layers of D_MODEL, a gpt2 BPE of `tokens`, a chat template;
    every tensor F32 (the FFN's down projection in `quantization` when given)."""
    from gguf import GGUFWriter  # the gguf extra: imported where a test has made sure it is there

    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(path), architecture)
    writer.add_block_count(N_LAYERS)
    writer.add_context_length(64)
    writer.add_embedding_length(D_MODEL)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(N_HEADS)
    writer.add_head_count_kv(N_KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(tokens))
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_chat_template(CHAT_TEMPLATE)
    head_dim = D_MODEL // N_HEADS

    def tensor(name: str, *shape: int) -> None:
        data = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if name.endswith("ffn_down.weight") and quantization is not None:
            writer.add_tensor(name, data, raw_dtype=quantization)  # raw bytes claimed to be of that type
            return
        writer.add_tensor(name, data)

    tensor("token_embd.weight", vocab, D_MODEL)
    tensor("output_norm.weight", D_MODEL)
    tensor("output.weight", vocab, D_MODEL)
    for index in range(N_LAYERS):
        block = f"blk.{index}."
        tensor(block + "attn_norm.weight", D_MODEL)
        tensor(block + "attn_q.weight", N_HEADS * head_dim, D_MODEL)
        tensor(block + "attn_k.weight", N_KV_HEADS * head_dim, D_MODEL)
        tensor(block + "attn_v.weight", N_KV_HEADS * head_dim, D_MODEL)
        tensor(block + "attn_output.weight", D_MODEL, N_HEADS * head_dim)
        tensor(block + "ffn_norm.weight", D_MODEL)
        tensor(block + "ffn_gate.weight", FFN, D_MODEL)
        tensor(block + "ffn_up.weight", FFN, D_MODEL)
        tensor(block + "ffn_down.weight", D_MODEL, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
