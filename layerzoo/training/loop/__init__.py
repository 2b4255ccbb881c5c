"""The training loop: the trainer, its learning-rate and window schedules, the segment curriculum,
and stopping cleanly on a signal."""
