"""Tests of the investigation tools (pytest, from the repository root)."""
