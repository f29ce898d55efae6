"""The Memcached operator: API types, desired state and reconciler, built on ``memop.runtime``."""
