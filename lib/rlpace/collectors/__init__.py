"""Collectors: environments plus a policy in, batches of experience out.

Sync, multi-process and async batched collectors with an inference server and
three backend tiers (threading, multiprocessing, Ray).
"""
