"""rlvr: reinforcement learning from verifiable rewards.

This package holds only the `rlvr` command and the version; the work lives in the
subpackages `rlvr.envs`, `rlvr.verifiers`, `rlvr.sandboxes`, `rlvr.trainer` and the
Hydra configs in `rlvr.conf`. Imports point one way (README, "Layout"):
`sandboxes <- verifiers <- envs <- trainer <- rlvr.cli`.
"""

__version__ = "0.1.0"
