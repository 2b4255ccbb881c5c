"""A hybrid whose SWA layers run at windows of their own: two SWA configs (8 and 32), the first
overridden to 16 at layer 2, beside an mLSTM layer without a window."""

HYBRID = {"model": {"d_model": 32, "vocab_size": 64, "layers": ["swa", "mlstm", "swa", "wide"],
                    "mixers": {"swa": {"n_heads": 2, "window": 8}, "wide": {"type": "swa", "n_heads": 2, "window": 32},
                               "mlstm": {"n_heads": 2}},
                    "overrides": {2: {"window": 16}}}}
