"""Evaluation: `rlvr eval` (runs, reports, pass@k) and the greedy held-out eval the trainer shares."""
