"""Run untrusted code: `factory.get_sandbox("docker"|"local").run(program, stdin, limits) -> Execution` (see README.md)."""

if __name__ != "rlvr.sandboxes":  # a bare `sandboxes` (from the repository root) is the installed package of that name
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
