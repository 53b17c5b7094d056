"""batchsched: a Kubernetes scheduler for AI/GPU batch work."""
