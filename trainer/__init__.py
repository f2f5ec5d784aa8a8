"""Training and evaluation: the loop here; rollout/, models/, algos/ and evaluation/ hold one concern each
(docs/architecture.md)."""

if __name__ != "rlvr.trainer":  # a bare `trainer` (from the repository root) is the installed package of that name
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
