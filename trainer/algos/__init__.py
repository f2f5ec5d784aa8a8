"""Algos: one step per algorithm, the pure losses and advantages, pairs, dynamic sampling, reward shaping."""
