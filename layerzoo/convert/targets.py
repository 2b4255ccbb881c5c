"""The options of the mixer a teacher's attention layer becomes: its shape derived from the
teacher's, so that every projection of attention maps onto it whole.

With H query heads of width D over Hkv key/value heads (d_model d):

| target | derived (fixed) | why |
|---|---|---|
| attention, swa | n_heads, n_kv_heads, head_dim, rope_theta, qkv_bias, qk_norm, qk_norm_eps | the same layer |
| gated_deltanet, kda | n_heads H, head_dim D, expand_v 1 | q, k, v, o of H heads of width D |
| mlstm | n_heads H, qk_dim_factor = v_dim_factor = H D / d | the same |
| mamba2 | head_dim D, d_state D, n_groups H, expand H D / d (an integer) | x of H heads, B and C one group per head |

Attention's output_gate, sinks and backend, and swa's window, default to the teacher layer's and
may be changed; every other option keeps the target's default. A pattern that sets a derived
option to another value is refused: the weights would not fit.
"""

from __future__ import annotations

from typing import Any

from ..errors import LayerzooError
from ..registry import get_mixer, read_options
from ..specs import LayerConfig
from .errors import ConvertError

SHAPE = ("n_heads", "n_kv_heads", "head_dim", "rope_theta", "qkv_bias", "qk_norm", "qk_norm_eps")
CARRIED = ("output_gate", "sinks", "backend", "window")  # attention to attention: the teacher's unless set


def heads(teacher: LayerConfig, d_model: int) -> tuple[int, int, int]:
    """(H, Hkv, D) of a teacher attention layer."""
    options = teacher.options
    n_heads = options["n_heads"]
    return n_heads, options["n_kv_heads"] or n_heads, options["head_dim"] or d_model // n_heads


def derived(teacher: LayerConfig, kind: str, d_model: int, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fixed options, defaults) of a `kind` mixer made from the teacher layer."""
    n_heads, _, head_dim = heads(teacher, d_model)
    width = n_heads * head_dim
    if kind in ("attention", "swa"):
        carried = {key: teacher.options[key] for key in CARRIED if key in teacher.options}
        if kind == "attention":
            carried.pop("window", None)
        return {key: teacher.options[key] for key in SHAPE}, carried
    if kind in ("gated_deltanet", "kda"):
        return {"n_heads": n_heads, "head_dim": head_dim, "expand_v": 1.0}, {}
    if kind == "mlstm":
        return {"n_heads": n_heads, "qk_dim_factor": width / d_model, "v_dim_factor": width / d_model}, {}
    if width % d_model:
        raise ConvertError(f"{where}: mamba2's inner width is expand * d_model, an integer multiple of d_model "
                           f"{d_model}; the teacher's heads are {n_heads} x {head_dim} = {width} wide")
    return {"head_dim": head_dim, "d_state": head_dim, "n_groups": n_heads, "expand": width // d_model}, {}


def student_options(teacher: LayerConfig, kind: str, given: dict[str, Any], d_model: int, where: str) -> dict[str, Any]:
    """Every declared option of the `kind` mixer that replaces the teacher layer: the derived ones,
    the pattern's, the rest at their defaults; ConvertError naming the option that cannot be."""
    fixed, defaults = derived(teacher, kind, d_model, where)
    for key, value in given.items():
        if key in fixed and value != fixed[key]:
            raise ConvertError(f"{where}: {kind}.{key} is {value!r}, but initialising from the teacher's attention "
                               f"needs {fixed[key]!r}; leave it unset")
    return complete(kind, defaults | given | fixed, d_model, f"{where}: {kind}.")


def complete(kind: str, options: dict[str, Any], d_model: int, prefix: str) -> dict[str, Any]:
    """Every declared option of a `kind` mixer, the given ones checked (types, bounds, the
    combinations at d_model); ConvertError(prefix + the option's error)."""
    entry = get_mixer(kind)
    try:
        made = read_options(entry.cls, options)
        made.check(d_model)
    except LayerzooError as error:
        raise ConvertError(f"{prefix}{error}") from None
    return {key: getattr(made, key) for key in entry.options}
