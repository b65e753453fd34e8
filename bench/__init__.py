"""Benchmarks for issue 8: each `python -m bench.<name>` prints its figures; none is part of the test suite."""
