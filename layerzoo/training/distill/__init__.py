"""Distillation of a converted model (the student: some of a transformer's attention layers
replaced by other mixers) from the transformer it came from (the teacher): the `distill:` spec
section (`config`), stage 1's per-layer alignment (`alignment`), stage 2's KL to the teacher
(`end_to_end`, with LoRA through peft in `lora`), one stage's resumable loop (`stage`), and the
run of both stages in a run folder (`run`).

Only the config is imported eagerly (training's package registers the `distill:` section with
specs, so that any checkpoint of a distillation reads back); the rest loads on first use.
"""
