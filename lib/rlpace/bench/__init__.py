"""The performance-regression harness (CLI ``rlpace-bench``).

Data flows one way: result files → results table → comparison → rendered report →
sink (file, stdout, GitHub). This package never imports the RL packages, and they
never import it.
"""
