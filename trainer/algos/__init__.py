"""Algorithms: one step per file, the pure losses and advantages, pairs, dynamic sampling, reward shaping, and the
shared update."""
