"""One module per ``rlpace-bench`` subcommand.

Each module defines ``NAME`` (the subcommand), ``HELP`` (one line),
``add_arguments(parser)`` and ``main(args) -> int``. ``main`` only turns the parsed
arguments into typed keyword arguments for a plain function elsewhere in
:mod:`rlpace.bench`; no argparse namespace travels further in. The CLI discovers the
modules of this package, so adding a command is adding a file. Building the parser
imports every module, so a module's top level imports only what its parser needs (the
light :mod:`rlpace.bench.choices`, :mod:`rlpace.bench.thresholds`, ...) and its ``main``
imports the work: pandas, scipy and jinja2 load only for the command that uses them.
"""
