"""rlvr: reinforcement learning from verifiable rewards.

This package holds the `rlvr` command (cli.py), its Python form `rlvr.train(...)` and `rlvr.evaluate(...)`
(api.py, imported on first use so that `import rlvr` stays light), the version, and what every layer imports
(errors.py, registry.py); the work lives in the subpackages `rlvr.envs`, `rlvr.verifiers`, `rlvr.sandboxes`,
`rlvr.trainer`, `rlvr.integrations` (rlvr's rewards for TRL and verl) and the Hydra configs in `rlvr.conf`.
Imports point one way (docs/architecture.md):
`rlvr.errors, rlvr.registry <- sandboxes <- verifiers <- envs <- trainer <- rlvr.cli, rlvr.api`.
"""

__version__ = "0.1.0"
__all__ = ["__version__", "evaluate", "train"]


def __getattr__(name: str):
    if name in ("train", "evaluate", "TrainResult"):
        from rlvr import api

        return getattr(api, name)
    raise AttributeError(f"module 'rlvr' has no attribute {name!r}")
