"""The scheduling framework: statuses, cycle state, extension points, profile runner."""
