"""Hostile programs, generated (issue 39): see vocab for the objects,
host for what every machine's runner shares, canary and handler for the
two observations every differential harness makes."""
