"""Hydra configs for the `rlvr` commands (YAML only)."""

if __name__ != "rlvr.conf":  # a bare `conf` (from the repository root) is the installed package of that name
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
