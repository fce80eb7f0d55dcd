"""Env processes of an AsyncBatchedCollector end when the collector's process dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# two collectors: one built in the main thread (the kernel's parent-death signal ends
# its env processes), one in another thread (the signal would follow that thread, so
# its env processes notice the death themselves within a poll round)
SCRIPT = textwrap.dedent(
    """
    import functools, threading, time
    from rlpace.collectors import AsyncBatchedCollector
    from rlpace.collectors.testing import CountingEnv, make_mlp_policy

    collectors = []

    def build():
        collectors.append(AsyncBatchedCollector(
            [functools.partial(CountingEnv, max_steps=3)] * 2, make_mlp_policy(),
            frames_per_batch=8, backend="multiprocessing",
        ))

    build()
    t = threading.Thread(target=build); t.start(); t.join()
    for c in collectors:
        c.next()
    print(" ".join(str(p.pid) for c in collectors for p in c._pool._procs), flush=True)
    time.sleep(600)
    """
)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_async_batched_workers_exit_when_the_main_process_dies():
    """Before: the env processes waited for the dead server forever (alive after 60 s)."""
    main = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(pid) for pid in main.stdout.readline().split()]
        assert len(workers) == 4, "the collectors did not start"
        assert all(_running(pid) for pid in workers)
        main.send_signal(signal.SIGKILL)
        main.wait(30)
        deadline = time.monotonic() + 30
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in workers if _running(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"env processes {left} of {workers} outlived the collector's process"
    finally:
        main.kill()
        main.wait(30)
