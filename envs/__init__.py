"""Task environments: rows (prompt messages, answer, reference solution) plus the verifiers that score them.

An environment never imports the trainer, a tokenizer or vLLM."""

if __name__ != "rlvr.envs":  # the folder is mapped to rlvr.envs; a bare `envs` is another package
    raise ImportError("import this package as rlvr.envs, not as a bare 'envs' (see pyproject's package-dir)")

from rlvr.envs.base import Env  # noqa: E402
from rlvr.envs.registry import load_env, register_env  # noqa: E402

__all__ = ["Env", "load_env", "register_env"]
