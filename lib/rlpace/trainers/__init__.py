"""Trainers: the training loop, PPO and SAC, structured configs, timing and checkpoints."""
