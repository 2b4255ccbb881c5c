"""Building blocks shared by mixers and assemblies."""

from .norms import RMSNorm
from .residual import Block
from .rotary import Rotary
from .short_conv import ShortConvolution
from .swiglu import SwiGLU, ffn_hidden_size

__all__ = ["Block", "RMSNorm", "Rotary", "ShortConvolution", "SwiGLU", "ffn_hidden_size"]
