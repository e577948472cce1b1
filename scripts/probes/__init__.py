"""Investigation tools: what explains a benchmark result (instructions,
system calls, where the time goes, file-worker bounds), run by hand from
scripts/ (`python -m probes.NAME --help`); scripts/bench runs none of
them. They reuse the benchmark's worker and workloads; the benchmark does
not import them. README.md says what each is for."""
