"""The scaling part of scripts/bench (issue 41, part 3): one loop per
interpreter (concurrent.interpreters, each on its own thread) against one
loop per process, 1 or 2 of them sharing a port through SO_REUSEPORT.
serve.py is one loop serving one app; server.py is the server program
(an arrangement of 1 or 2 of them); bench.py runs the samples; report.py
makes the report."""
