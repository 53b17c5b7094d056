"""Live views of a running cluster: the queue, why a workload waits, the GPUs.

Pure functions compute each view from objects listed once (`state.LiveState`), driving the
same ordering, quota, cycle and backfill code the scheduler runs; `live.py` lists the
objects from the API server (read-only) and prints.
"""
