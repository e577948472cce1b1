"""A differential test of the transport layer that generates programs
(issue 19, item 2): random programs of transport and stream operations run
on stock asyncio and on zloopgo, every observation compared step by step.

- `programs`: what a program is (plain JSON data) and the hypothesis
  strategies that generate one per machine.
- `peer`: the other end of each connection, driven synchronously by the
  runner (a raw socket, or a TLS server over one).
- `runner`: runs one program on one loop and records its observations;
  also the worker process that runs programs sent to it over a pipe.
- `workers`: the worker processes seen from the test (crash and hang
  isolation, restarts).
- `compare`: the first difference between two observation lists, and
  the signature that names it.
- `__main__`: the command line (`python -m tests.transport_diff --help`).

What is compared, and what is not compared because it depends on timing
or on the kernel's memory accounting, is described in `runner`. Programs
draw hostile objects, the exception handler's modes and the descriptor
canary from tests/hostile/ (docs/hostile.md).
"""
