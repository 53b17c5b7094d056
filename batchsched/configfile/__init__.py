"""What every config file shares: strict YAML, errors that name a YAML path, the strict document
base and Go durations.

The scheduler config (`batchsched.config`) and the tenant quota file (`queues.config`) both
stand on it, so neither depends on the other. It imports only the model, pydantic and PyYAML.
"""
