"""bench/run's suite (bench/README.md), one module per part:

    common     paths, tools, logging, subprocesses, hashes
    variants   the VARIANTS table (adding a variant is one line) and what is known of them
    programs   testdata/bench/<name>/BUILD
    builds     building a program with a variant (cached)
    runs       running a build in a scratch directory
    profiles   the figures a run's profile, paths and trace give
    measure    the counting, timed and callgrind runs
    figures    ratios, geomeans, the oracle check, the targets
    fmt        how figures are written
    markdown   the report (docs/benchmarks.md) and the outputs
    sections   the report's sections on placements, traces, SESE counters, path profiles
    svg        the chart (docs/benchmarks.svg)
    suite      the command line and the whole run, phase by phase
"""
