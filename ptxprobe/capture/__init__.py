"""A user's program as the unit: capture its kernels, swap renamed cubins in, time it A/B."""
