"""Task environments: rows (prompt messages, answer, reference solution) plus the verifiers that score them.

An environment never imports the trainer, a tokenizer or vLLM."""

if __name__ != "rlvr.envs":  # a bare `envs` (from the repository root) is the installed package of that name
    from rlvr.bare_names import hand_over

    hand_over(__name__, __file__)
else:
    from rlvr.envs.base import Env
    from rlvr.envs.registry import load_env, register_env

    __all__ = ["Env", "load_env", "register_env"]
