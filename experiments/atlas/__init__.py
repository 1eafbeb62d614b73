"""The atlas of the name effect in the wild (issue: how often the name changes the kernels people run)."""
