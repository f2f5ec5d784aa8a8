"""Verifiers: score one completion against a record and return a typed `VerifyResult`.

The contract sits at the top of this folder (result.py, registry.py, compose.py, batch.py, pool.py), the verifiers
of one file beside it (exact, format, countdown, reasoning_gym, canary; extract.py and safe_arith.py help them),
and each family of several files in a folder of its own whose verifier.py registers it: math/, code/, vf/, python/.
"""

if __name__ != "rlvr.verifiers":  # a bare `verifiers` (from the repository root) is the installed package of that name
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
else:
    from rlvr.verifiers.result import Status, VerifyResult
    from rlvr.verifiers.registry import build_verifier, register_verifier
    from rlvr.verifiers.compose import build_reward

    __all__ = ["Status", "VerifyResult", "build_reward", "build_verifier", "register_verifier"]
