"""What the training loop trains: language modelling, distillation's alignment and end-to-end
stages (an Objective each, base.py), and how they read their batches."""
