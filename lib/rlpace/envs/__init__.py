"""Environments that rlpace ships, following torchrl's ``EnvBase`` API."""
