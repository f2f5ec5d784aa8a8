"""Models: loading, the tiny model, its warm start, LoRA, logprobs."""
