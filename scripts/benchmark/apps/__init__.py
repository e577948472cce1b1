"""The application rows of scripts/bench: TechEmpower-style servers in front
of PostgreSQL and Redis, a WebSocket echo, and the Go load generator that
drives them (apps/bench.py says how; `python -m benchmark.apps`)."""
