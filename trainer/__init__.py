"""Training and evaluation: the loop here; rollout/, models/, algos/ and evaluation/ hold one concern each
(docs/architecture.md)."""

if __name__ != "rlvr.trainer":  # the folder is mapped to rlvr.trainer; a bare `trainer` is another package
    raise ImportError("import this package as rlvr.trainer, not as a bare 'trainer' (see pyproject's package-dir)")
