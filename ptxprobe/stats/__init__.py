"""Paired statistics of GPU timings: log ratios, intervals and the verdict vocabulary."""
