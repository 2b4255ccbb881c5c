"""What Gated DeltaNet keeps for its backward: the projections, the kernel's inputs and workspace,
not the outputs of its convolutions, norms and gates (recomputed in the backward)."""

import torch

from layerzoo.registry import get_mixer

WIDTH, HEADS, TOKENS, CHUNK = 64, 4, 256, 32  # head_dim 16: a state per chunk is 2 widths


def kept_bytes(module: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd keeps for module(x)'s backward, the weights' left out."""
    weights = {p.untyped_storage().data_ptr() for p in module.parameters()}
    storages = {}

    def keep(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in weights:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        module(x)
    return sum(storages.values())


def test_gated_deltanet_keeps_about_what_flash_linear_attention_keeps():
    torch.manual_seed(0)
    layer = get_mixer("gated_deltanet").cls(WIDTH, n_heads=HEADS, expand_v=1.0, chunk_size=CHUNK)
    x = torch.randn(1, TOKENS, WIDTH, requires_grad=True)
    activation = x.numel() * x.element_size()  # one (B, T, d_model) fp32 tensor
    # x, q, k, v projected and activated, the kernel's workspace (a state per chunk, corrected
    # values, w, the chunks' inverses), o and the gate, o_proj's input: about 14 widths, and g and
    # beta. The convolutions', L2 norms' and output norm's own outputs would add about 9 more.
    assert kept_bytes(layer, x) <= 15 * activation
