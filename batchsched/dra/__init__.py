"""Dynamic Resource Allocation (resource.k8s.io/v1): the objects, CEL device selectors and the
pure allocator that decides which devices a claim gets."""
