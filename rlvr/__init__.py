"""rlvr: reinforcement learning from verifiable rewards.

This package holds only the `rlvr` command and the version; the work lives in the
subpackages `rlvr.envs`, `rlvr.verifiers`, `rlvr.sandboxes`, `rlvr.trainer` and the
Hydra configs in `rlvr.conf` (see DESIGN.md for the one-way import order).
"""

__version__ = "0.1.0"
