"""Decoding through transformers' generate() against layerzoo's own: time per token and state per sequence against context length.

    python benchmarks/hf_decode.py                        # swax, swax-gdn, swa-full, transformer at 1k, 4k, 16k, 64k
    python benchmarks/hf_decode.py --specs swax --lengths 1024 4096 --json decode.json --plot decode.png

Every spec is built at d_model 256, 8 layers, vocab 32000 and 4 attention heads (spec overrides,
SPECS below), fp32, batch 1, no grad, one thread (--threads). At each context length L the
prompt's first L - 1 tokens are read once, in pieces of --chunk tokens (the prefill column:
seconds, one run); both loops then continue from that state, greedily: layerzoo's
generate(state=...) and transformers' generate with a LayerzooCache holding it (its prefix
caching: the last prompt token is read there). Time per token is the difference between
generating --tokens + 2 and 2 tokens, over --tokens: what each further token costs, the first
step and the prompt's handling cancelling. Cells interleave over --reps rounds and the best run
of each is kept, so a shared machine's busy spells slow both loops alike; the ratio column comes
from the same rounds. State per sequence: bytes of the mixer states after L tokens, the same
states in both loops.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import layerzoo  # noqa: E402
from layerzoo.hf import LayerzooCache, LayerzooForCausalLM  # noqa: E402
from layerzoo.mixers.states import zip_states  # noqa: E402

from common import interleaved_best_seconds, markdown_table  # noqa: E402

SIZE = ["model.d_model=256", "model.n_layers=8", "model.vocab_size=32000"]
SPECS = {
    "swax": ["model.mixers.swa.n_heads=4"],
    "swax-gdn": ["model.mixers.swa.n_heads=4", "model.mixers.gated_deltanet.n_heads=4",
                 "model.mixers.gated_deltanet.head_dim=64"],
    "swa-full": ["model.mixers.swa.n_heads=4", "model.mixers.attention.n_heads=4"],
    "transformer": ["model.mixers.attention.n_heads=4"],
}
FIRST = 2  # tokens both timed calls generate; the difference is --tokens more


def build(name: str) -> LayerzooForCausalLM:
    torch.manual_seed(0)
    return LayerzooForCausalLM.from_spec(name, SIZE + SPECS[name]).eval()


@torch.no_grad()
def prefill(model: LayerzooForCausalLM, prompt: torch.Tensor, chunk: int) -> list:
    """The states after the prompt's tokens (1, L), read `chunk` at a time."""
    state = None
    for piece in prompt.split(chunk, dim=1):
        _, state = model.model(piece, state, return_state=True, logits_to_keep=1)
    return state


def state_bytes(state: list) -> int:
    sizes: list[int] = []
    zip_states(lambda parts: sizes.append(parts[0].numel() * parts[0].element_size()), [state])
    return sum(sizes)


def decoders(model: LayerzooForCausalLM, prompt: torch.Tensor, state: list, tokens: int) -> dict:
    """{(loop, new tokens): fn} generating FIRST and FIRST + tokens tokens after `prompt` (1, L),
    whose first L - 1 tokens `state` holds."""
    def layerzoo_loop(n: int):
        return lambda: model.model.generate(prompt[:, -1:], n, state=state)

    def hf_loop(n: int):
        # a fresh cache per call: generate replaces its states (the state tensors are never written)
        return lambda: model.generate(prompt, cache=LayerzooCache(state, columns=prompt.shape[1] - 1),
                                      max_new_tokens=n, do_sample=False, pad_token_id=0)

    return {(loop, n): make(n) for loop, make in (("layerzoo", layerzoo_loop), ("hf", hf_loop))
            for n in (FIRST, FIRST + tokens)}


def markdown(rows: list[dict]) -> str:
    head = ["spec", "context", "state MiB / sequence", "prefill s", "layerzoo ms / token", "HF ms / token", "HF / layerzoo"]
    return markdown_table(head, [
        [row["spec"], f"{row['context']:,}", f"{row['state_bytes'] / 2**20:.2f}", f"{row['prefill_s']:.1f}",
         f"{row['layerzoo_ms']:.2f}", f"{row['hf_ms']:.2f}", f"{row['hf_ms'] / row['layerzoo_ms']:.2f}x"]
        for row in rows])


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for spec in dict.fromkeys(row["spec"] for row in rows):
        mine = [row for row in rows if row["spec"] == spec]
        contexts = [row["context"] for row in mine]
        line, = time_axis.plot(contexts, [row["hf_ms"] for row in mine], marker="o", label=f"{spec} (HF)")
        time_axis.plot(contexts, [row["layerzoo_ms"] for row in mine], marker="x", linestyle="--", color=line.get_color(),
                       label=f"{spec} (layerzoo)")
        memory_axis.plot(contexts, [row["state_bytes"] / 2**20 for row in mine], marker="o", label=spec)
    for axis, label in ((time_axis, "ms per decoded token"), (memory_axis, "state MiB per sequence")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel(label)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", nargs="+", default=list(SPECS), choices=list(SPECS))
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--tokens", type=int, default=32, help="decoded tokens timed per call (default 32)")
    parser.add_argument("--chunk", type=int, default=2048, help="prefill piece length (default 2048)")
    parser.add_argument("--reps", type=int, default=3, help="interleaved rounds; the best run of each cell counts")
    parser.add_argument("--budget", type=float, default=30.0, help="stop repeating a cell past this many seconds")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: one sequence's decoding step is small ops, and on a shared "
                             "machine a second thread mostly waits)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--plot", type=Path, help="also draw time and state against context length into this PNG")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    rows = []
    for name in args.specs:
        model = build(name)
        for length in args.lengths:
            prompt = torch.randint(0, 32000, (1, length), generator=torch.Generator().manual_seed(length))
            start = time.perf_counter()
            state = prefill(model, prompt[:, :-1], args.chunk)
            prefill_s = time.perf_counter() - start
            cells = decoders(model, prompt, state, args.tokens)
            same = cells["hf", FIRST + args.tokens]()
            assert torch.equal(same, torch.cat((prompt[:, :-1], cells["layerzoo", FIRST + args.tokens]()), 1)), name
            best = interleaved_best_seconds(cells, args.reps, args.budget, "cpu")
            per_token = {loop: (best[loop, FIRST + args.tokens] - best[loop, FIRST]) / args.tokens * 1e3
                         for loop in ("layerzoo", "hf")}
            with torch.no_grad():
                _, after = model.model(prompt[:, -1:], state, return_state=True)
            rows.append({"spec": name, "context": length, "state_bytes": state_bytes(after), "prefill_s": prefill_s,
                         "layerzoo_ms": per_token["layerzoo"], "hf_ms": per_token["hf"]})
            print(f"{name} at {length} done", file=sys.stderr, flush=True)
    took = time.perf_counter() - started
    print(f"{', '.join(args.specs)} at {' '.join(SIZE)}, 4 attention heads; fp32, batch 1, greedy, "
          f"{torch.get_num_threads()} threads; {args.tokens} tokens timed per cell, best of {args.reps} interleaved "
          f"rounds; the run took {took / 60:.1f} min\n")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps({"config": {k: str(v) for k, v in vars(args).items()}, "torch": torch.__version__,
                                         "rows": rows, "seconds": took}, indent=2))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
