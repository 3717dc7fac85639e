"""Experiments: jobs written on the public API, run for a fixed time and measured.

Shared by ``cairn demo`` and the benchmark (``bench/``, which never imports the CLI). They
build and submit jobs through ``cairn.datastream``, so they sit above it, below the CLI;
``skew`` is seed 000's checkpoint-alignment experiment.
"""
