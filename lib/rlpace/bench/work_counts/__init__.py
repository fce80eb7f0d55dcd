"""Work counts: the kernels, syncs, copies, aten ops and Python calls of a call.

Two kinds of case stay on the clock however noisy it is: the GPU set's (on a shared
GPU machine the same code's time moves 17-35 % from process to process) and the CPU
set's wall-clock cases (workers, threads, waits). What such a call *does on its own
thread* does not move with the machine: how many kernels it launches, how often the
host waits for the device, how many copies, how many aten operators, how many Python
functions and builtins it calls. A change that adds a sync, a copy, a kernel, an
operator or a Python call to that path moves these counts exactly, however busy the
machine is. For the GPU set they are the counterpart of the CPU set's
instruction counts; for a wall-clock case they see the calling thread's share of the
work (a collector's batch assembly) and the Python calls of its forked worker
processes (:mod:`~rlpace.bench.work_counts.workers`) and of its other threads
(:mod:`~rlpace.bench.work_counts.threads`).

The suite's pytest plugin counts every CUDA case, every wall-clock case and every
CPU-clock case the count tier leaves out (``torch.compile``, the cases too slow under
Valgrind; in 4 calls) once more after timing it (:func:`~rlpace.bench.work_counts.measure.measure_work_counts`: ``torch.profiler`` and ``cProfile``, each of
:data:`~rlpace.bench.work_counts.measure.CALLS` calls in a region of its own) and keeps the per-call counts in the
result's ``extra_info["work_counts"]`` (``$RLPACE_BENCH_WORK_COUNTS=0`` turns that
off; ``rlpace-bench pr`` counts in the first run of each side, since the counts
repeat). :func:`~rlpace.bench.work_counts.verdict.compare_work_counts` judges base against head per case, and
:func:`~rlpace.bench.work_counts.join.apply_work_counts` joins that to the timing comparison (the
:class:`~rlpace.bench.judge.Judge` does it, so ``compare`` and ``pr`` agree):

- a metric *moved* when the typical head call counts more (or fewer) than the
  typical base call. A side's typical call is the count at least 3 in 4 of its calls
  share (:data:`~rlpace.bench.work_counts.verdict.TYPICAL_SHARE`); the others did occasional work (a buffer's
  wrap-around, an epoch's reshuffle) that is not the call's own. Where a side has no
  typical call, the metric moved only when every head call is beyond every base call,
  so work that varies with the sampled data does not flag;
- Python calls, which a polling loop can nudge
  (:data:`~rlpace.bench.work_counts.verdict.CLOCK_FOLLOWING`), must move by more than
  1 %: typical calls clear of each other side's every call or, where a side has none,
  the medians of two settled sides (middle halves within 0.25 %) whose middle halves
  do not overlap;
- **regression**: at least one metric rose and none fell. The row is flagged,
  whatever the clock said ("work-count regression; time did not move enough to flag");
- **improvement**: at least one fell and none rose; the row is marked improved unless
  the clock flagged a regression;
- **mixed** (some rose, some fell) and **same**: the timing verdict stands, with a note.

Modules: :mod:`~rlpace.bench.work_counts.measure` (the profiler pass),
:mod:`~rlpace.bench.work_counts.workers` (the worker processes' Python calls),
:mod:`~rlpace.bench.work_counts.threads` (the other threads'),
:mod:`~rlpace.bench.work_counts.marks` (both read from quiet to quiet),
:mod:`~rlpace.bench.work_counts.verdict` (one case, base against head, pure) and
:mod:`~rlpace.bench.work_counts.join` (the rows of a comparison, for the judge).

What these counts do not see: a kernel that got slower without launching more (a
bigger copy, a worse algorithm on the device), Python code that got slower without
calling more (a longer loop of arithmetic), operators run in other threads, and work
in processes not forked from the case's. The clock still judges those.

Example:
    >>> from rlpace.bench.work_counts.verdict import compare_work_counts
    >>> base = {"calls": 2, "kernels": [4, 4], "syncs": [0, 0], "copies": [1, 1], "ops": [9, 9]}
    >>> head = {"calls": 2, "kernels": [6, 6], "syncs": [2, 2], "copies": [1, 1], "ops": [13, 13]}
    >>> change = compare_work_counts("t", head, base)
    >>> change.verdict, change.moved
    ('regression', ('kernels', 'syncs', 'ops'))
"""

__all__: list[str] = []  # the public names live in the submodules above
