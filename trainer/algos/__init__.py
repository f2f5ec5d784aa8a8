"""Algorithms: one `update(ctx, batch)` per file, the pure losses and advantages, pairs, and the shared micro-batch
update (update.py). The step around each update is trainer/step.py's."""
