"""The discrete-event simulator: traces and workloads replayed through the scheduler's core.

`batchsched simulate` (see `command.py`) is the entry point; `run.simulate` runs one simulation
from a cluster, arriving pods and a profile; `engine.Simulator` is the virtual clock and queue;
`trace` reads the Alibaba GPU 2023 CSVs; `sampler` is the paper's (ATC '23) workload sampling.
"""
