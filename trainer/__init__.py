"""Rollout engines, algorithm math, the training loop, checkpoints and evaluation."""

if __name__ != "rlvr.trainer":  # the folder is mapped to rlvr.trainer; a bare `trainer` is another package
    raise ImportError("import this package as rlvr.trainer, not as a bare 'trainer' (see pyproject's package-dir)")
