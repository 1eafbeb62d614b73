"""NVIDIA's tools: finding, identifying and installing ptxas releases, assembling PTX, and scanning a ptxas
binary for the name literals it tests.
"""
