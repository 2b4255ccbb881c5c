"""A run on disk: its folder, checkpoints (writing, reading, choosing the newest usable one,
resuming), metrics.jsonl and TensorBoard events, and what a finished run says about itself."""
