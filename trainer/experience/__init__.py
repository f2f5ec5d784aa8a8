"""Experience: what one training step collects before an algorithm learns from it. The step's prompts and the
engine's completions (collect.py), the reward pipeline from the verifiers' scores to the rewards the advantages
see (rewards.py), the batch an algorithm's `update(ctx, batch)` receives (batch.py), the step's metrics and
logged samples (metrics.py), and the asynchronous producer that collects ahead of the trainer
(async_rollouts.py). It calls the engines (trainer/rollout/) and never the algorithms (trainer/algos/)."""
