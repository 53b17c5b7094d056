"""Strict YAML reading, which lives in `batchsched.configfile.yaml_source` (the tenant quota file
reads its YAML the same way); importable from here as before."""

from batchsched.configfile.yaml_source import (
    MAX_DEPTH,
    MAX_EXPANDED_NODES,
    parse_yaml,
    read_source,
    single_document,
)

__all__ = ["MAX_DEPTH", "MAX_EXPANDED_NODES", "parse_yaml", "read_source", "single_document"]
