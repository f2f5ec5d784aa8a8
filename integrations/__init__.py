"""rlvr's rewards inside other trainers: reward_functions.py exports them as TRL reward functions and verl's
`compute_score`. Built on environments and verifiers; nothing in rlvr imports it, and it imports no trainer."""

if __name__ != "rlvr.integrations":  # a bare `integrations` (from the repository root) is the installed one
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
