"""GPU topology model, NVML reader and node agent (built in the GPU topology issue)."""
