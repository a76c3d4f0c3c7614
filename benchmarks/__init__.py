"""The benchmarks: each a module run from the repository root as ``python -m benchmarks.NAME``.

:mod:`benchmarks.harness` is what they share (data, noise, metrics, baselines, tables, plots,
provenance, results); ``python -m benchmarks.index`` lists the results in
``benchmarks/results/INDEX.md``.
"""
