"""`layerzoo lm-eval ARGS...`: lm-evaluation-harness's own command line, with layerzoo's model type registered.

    layerzoo lm-eval --model hf --model_args pretrained=DIR --tasks hellaswag

A plain `lm_eval` process never imports layerzoo, and neither lm_eval nor transformers has a
plugin hook that would, so it cannot read a folder whose config.json says model_type "layerzoo"
(short of remote code and trust_remote_code, which layerzoo does not use). This runs lm_eval's
command line unchanged in a process that has imported layerzoo.hf. From Python, `import
layerzoo.hf` before `lm_eval.simple_evaluate(model="hf", ...)` does the same.
"""

from __future__ import annotations

import sys

from . import LayerzooForCausalLM  # noqa: F401  (importing layerzoo.hf registers the model type)


def run_lm_eval(arguments: list[str]) -> int:
    """Run `lm_eval ARGUMENTS...` here; returns its exit code."""
    try:
        from lm_eval.__main__ import cli_evaluate
    except ImportError:
        raise ImportError("layerzoo lm-eval needs lm-evaluation-harness: pip install 'layerzoo[eval]'") from None
    saved, sys.argv = sys.argv, ["lm_eval", *arguments]  # lm_eval parses sys.argv itself
    try:
        cli_evaluate()
    except SystemExit as exit:  # argparse's --help and usage errors
        return exit.code if isinstance(exit.code, int) else 1
    finally:
        sys.argv = saved
    return 0
