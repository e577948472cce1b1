"""Tests of the benchmark harness (pytest, from the repository root)."""
