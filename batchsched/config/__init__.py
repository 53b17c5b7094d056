"""Scheduler configuration: KubeSchedulerConfiguration YAML to validated, resolved profiles."""

from batchsched.config.scheduler_config import (
    ProfileConfig,
    SchedulerConfig,
    config_from_mapping,
    default_config,
    load_config,
)
from batchsched.configfile.errors import ConfigError, Issue

__all__ = [
    "ConfigError",
    "Issue",
    "ProfileConfig",
    "SchedulerConfig",
    "config_from_mapping",
    "default_config",
    "load_config",
]
