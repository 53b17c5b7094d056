"""The config errors, which live in `batchsched.configfile.errors` (the tenant quota file raises
them too); importable from here as before."""

from batchsched.configfile.errors import ConfigError, Issue, quote, validation_issues, yaml_path

__all__ = ["ConfigError", "Issue", "quote", "validation_issues", "yaml_path"]
