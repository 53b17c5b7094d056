"""Gang scheduling: PodGroups (scheduler-plugins' scheduling.x-k8s.io/v1alpha1) placed whole."""
