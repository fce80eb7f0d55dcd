"""Ray backend, against a local Ray instance limited to this machine's two cores."""

from __future__ import annotations

import functools
import shutil
import tempfile

import pytest
import torch

from rlpace.collectors import AsyncBatchedCollector, EnvStepError, WorkerDiedError
from rlpace.collectors.testing import CountingEnv, make_mlp_policy

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray instance for this module, its session files in a directory of its own
    that goes with it (Ray's default, ``/tmp/ray``, outlives the tests)."""
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'rlpace[ray]'")
    started = not ray.is_initialized()
    # short: Ray's socket paths live under it, and a Unix socket path has ~107 bytes
    temp = tempfile.mkdtemp(prefix="rlpace-ray-") if started else None
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    yield ray
    if started:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_actors_collect_batches_and_report_env_errors(ray_local, check_trajectories):
    env_fns = [functools.partial(CountingEnv, max_steps=3)] * 3
    c = AsyncBatchedCollector(
        env_fns, make_mlp_policy(), frames_per_batch=24, total_frames=72, backend="ray"
    )
    batches = [c.next(), c.next()]
    assert [b.numel() for b in batches] == [24, 24]
    for batch in batches:
        env_ids = batch["collector", "env_ids"]
        assert torch.equal(env_ids, env_ids.sort().values)
        check_trajectories(batch)
    # a dead actor is reported, not waited for
    ray_local.kill(c.transport._actors[0])
    with pytest.raises(WorkerDiedError, match="worker 0 died"):
        for _ in range(100):
            c.next()
    c.shutdown()
    c.shutdown()

    env_fns[1] = functools.partial(CountingEnv, max_steps=50, fail_at_step=4)
    c = AsyncBatchedCollector(env_fns, make_mlp_policy(), frames_per_batch=60, backend="ray")
    with pytest.raises(EnvStepError, match="env 1 raised RuntimeError"):
        for _ in range(100):  # env 1's actor may start last; it fails on its 4th step
            c.next()
    assert c.server._thread is None


def test_ray_actors_stop_two_batches_ahead_of_a_lagging_consumer(ray_local, check_back_pressure):
    envs = 2
    with AsyncBatchedCollector(
        [CountingEnv] * envs, make_mlp_policy(), frames_per_batch=8, backend="ray"
    ) as c:
        check_back_pressure(c, envs, settle=0.5)
