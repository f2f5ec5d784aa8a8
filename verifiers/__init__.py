"""Verifiers: score one completion against a record and return a typed `VerifyResult`."""

if __name__ != "rlvr.verifiers":  # a bare `verifiers` (from the repository root) is the installed package of that name
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
else:
    from rlvr.verifiers.result import Status, VerifyResult
    from rlvr.verifiers.registry import build_verifier, register_verifier
    from rlvr.verifiers.compose import build_reward

    __all__ = ["Status", "VerifyResult", "build_reward", "build_verifier", "register_verifier"]
