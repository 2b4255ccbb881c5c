"""Tiny random layerzoo folders vLLM can serve (head size 32, reference kernels: nothing to
compile), one LLM per folder, and the check of vLLM's tokens against layerzoo's own model."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Iterator

import torch

from layerzoo.hf import LayerzooForCausalLM

D_MODEL, VOCAB = 64, 256
# Every mixer at head size 32 (vLLM's CPU attention takes no smaller), on kernels in plain PyTorch
MIXERS = {
    "swa": {"n_heads": 2, "n_kv_heads": 1, "window": 24, "qk_norm": True, "output_gate": True, "sinks": True,
            "backend": "sdpa"},
    "attention": {"n_heads": 2, "n_kv_heads": 1, "qk_norm": True, "backend": "sdpa"},
    "gated_deltanet": {"n_heads": 2, "head_dim": 32, "chunk_size": 16, "backend": "chunkwise"},
    "kda": {"n_heads": 2, "head_dim": 32, "chunk_size": 16, "backend": "chunkwise"},
    "mamba2": {"head_dim": 32, "d_state": 16, "chunk_size": 16, "backend": "chunkwise"},
    "mlstm": {"n_heads": 2, "chunk_size": 16, "backend": "chunkwise"},
    "assoc_memory": {"segment_size": 16, "d_mem": 32, "n_heads": 2, "zero_init_values": False, "backend": "chunkwise"},
}


def save_model(folder: Path, pattern: list[str], seed: int = 0) -> LayerzooForCausalLM:
    """A random model of `pattern` (one layer per name) saved into folder; returns it, in eval mode."""
    torch.manual_seed(seed)
    spec = {"model": {"d_model": D_MODEL, "vocab_size": VOCAB, "n_layers": len(pattern), "pattern": pattern,
                      "mixers": {name: MIXERS[name] for name in set(pattern)}, "ffn": {"hidden": 128}}}
    model = LayerzooForCausalLM.from_spec(spec).eval()
    model.save_pretrained(folder)
    return model


@contextlib.contextmanager
def served(folder: Path, **options) -> Iterator:
    """vLLM's LLM over folder, fp32, no tokenizer; gone (its memory freed) on the way out."""
    from vllm import LLM

    settings = {"skip_tokenizer_init": True, "enforce_eager": True, "dtype": "float32", "max_model_len": 512,
                "enable_prefix_caching": False, "seed": 0} | options
    llm = LLM(model=str(folder), **settings)
    try:
        yield llm
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def prompts(lengths: list[int], seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(1, VOCAB, (length,), generator=generator).tolist() for length in lengths]


def greedy(llm, token_lists: list[list[int]], new_tokens: int) -> list[tuple[list[int], list[float]]]:
    """vLLM's greedy continuation of each prompt, all at once: (tokens, their log-probabilities)."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=new_tokens, logprobs=0, ignore_eos=True)
    outputs = llm.generate([{"prompt_token_ids": tokens} for tokens in token_lists], params, use_tqdm=False)
    return [(list(out.outputs[0].token_ids), [step[token].logprob for step, token in
                                              zip(out.outputs[0].logprobs, out.outputs[0].token_ids)])
            for out in outputs]


def check_against_layerzoo(model: LayerzooForCausalLM, prompt: list[int], tokens: list[int], logprobs: list[float],
                           tolerance: float = 1e-3, tie: float = 1e-4) -> None:
    """Each token vLLM chose is layerzoo's argmax after the same tokens (or within `tie` of it in
    log-probability, as a random tiny model's near-flat logits allow), and its log-probability
    within `tolerance` of layerzoo's (fp32, computed in float64)."""
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        reference = torch.log_softmax(model(ids).logits[0, len(prompt) - 1:-1].double(), dim=-1)
    for step, (token, logprob) in enumerate(zip(tokens, logprobs)):
        best = reference[step].max().item()
        assert reference[step, token].item() >= best - tie, (
            f"step {step}: vLLM chose {token} (layerzoo's log-prob {reference[step, token].item():.6f}), "
            f"layerzoo's argmax {reference[step].argmax().item()} ({best:.6f})")
        assert abs(reference[step, token].item() - logprob) <= tolerance, (
            f"step {step}: token {token}'s log-prob is {logprob:.6f} in vLLM, {reference[step, token].item():.6f} in layerzoo")
