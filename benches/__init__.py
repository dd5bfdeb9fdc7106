"""Benchmarks of dsh-trio against the raw trio floor and peer frameworks (issue #5).

Run everything with ``python -m benches``; see ``benches/README.md`` for the scenarios,
the flags, the heap conditions and the measured tables. Nothing here is part of the test
suite's timing: ``tests/test_benches_smoke.py`` only runs each scenario at a tiny size so
the code cannot rot.
"""
