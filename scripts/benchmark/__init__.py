"""zloopgo's benchmark harness: fresh-process samples, rotation, parity
counters, statistics and a Markdown report. Run it through scripts/bench."""
