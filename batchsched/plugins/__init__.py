"""Built-in plugins with kube-scheduler semantics, one module per plugin."""
