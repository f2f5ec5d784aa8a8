"""Algorithms: one step per file, the pure losses and advantages, and the shared update."""
