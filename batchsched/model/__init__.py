"""Kubernetes object model: quantities, resources, and lean pod/node views."""
