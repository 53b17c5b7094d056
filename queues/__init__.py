"""Tenant queues, quota configuration and fair-share ordering (built in the tenant queue issue)."""
