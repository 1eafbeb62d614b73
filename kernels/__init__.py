"""Attention kernels studied by ptxprobe.

Each module exposes ``FAMILIES``: a tuple of :class:`ptxprobe.sources.registry.KernelFamily`
objects that describe how to compile, launch and check its kernels.
"""
