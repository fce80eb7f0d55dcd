"""The count tier: instructions and estimated cycles per call, counted under Callgrind.

Wall time on a shared machine moves by 2-25 % between processes; the instructions a
call executes move by well under 1 %. This package runs the single-process cases of
the suite under Valgrind's Callgrind (one process per tree, client requests around
each measured call), reads the dumps, and judges base against head by the relative
change of the counts against the tier's own A/A spread.

Modules: :mod:`~rlpace.bench.counts.toolchain` (Valgrind, gcc and the client-request
shim), :mod:`~rlpace.bench.counts.session` (the counting process),
:mod:`~rlpace.bench.counts.dumps` (dump files), :mod:`~rlpace.bench.counts.pricing`
(allocator and type-cache calls at a fixed price), :mod:`~rlpace.bench.counts.records`
(count files), :mod:`~rlpace.bench.counts.verdict` (the pure maths) and
:mod:`~rlpace.bench.counts.why` (what grew between two dumps).

Example:
    >>> from rlpace.bench.counts.verdict import relative_change
    >>> relative_change(1.02e6, 1.0e6)
    0.02
"""

__all__: list[str] = []  # the public names live in the submodules above
