"""The CPU-second-sized spec with a training section that the training tests share."""

TINY = """\
name: tiny
model:
  d_model: 32
  n_layers: 2
  vocab_size: 64
  mixers:
    swa: {n_heads: 2, window: 8}
    attention: {n_heads: 2}
  pattern: [swa, attention]
  ffn: {hidden: 64}
training:
  task: {name: mqar, num_pairs: 4}
  seq_len: 32
  steps: 6
  batch_size: 8
  seed: 3
  optimizer: {lr: 3e-3, warmup_steps: 2}
  window: {schedule: stochastic, short: 4, long: 16, p_short: 0.5}
  eval: {every: 100, samples: 8, lengths: [32, 64], batch_size: 8}
  log_every: 1
"""
