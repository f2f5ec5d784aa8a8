"""Bare names of the repository's folders: `import verifiers` from the repository root gets the installed
package of that name, never this repository's folder.

The folders envs/, verifiers/, sandboxes/, integrations/, trainer/ and conf/ are the subpackages rlvr.envs,
rlvr.verifiers, ... (pyproject's package-dir). Run from the repository root (`python -m rlvr`, `python -m pytest`,
a script there), the root is on sys.path ahead of site-packages, so a bare `import verifiers` finds the folder,
not PyPI's `verifiers` (PrimeIntellect's environments library; PyPI also has packages named `envs` and `trainer`).
Each folder's `__init__` calls `hand_over` when imported under its bare name: the next package of that name
on sys.path (the repository root left out) is loaded and put in its place in sys.modules, which is what the
import statement then returns (importlib returns `sys.modules[name]` after running a module); with no such
package, ImportError says to import `rlvr.<name>`. The console script `rlvr` never has the root on sys.path.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def hand_over(name: str, init_file: str) -> None:
    """Replace the bare-named module `name` (this repository's folder, whose `__init__` is `init_file`)
    with the package of that name found on sys.path outside the repository root."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(init_file)))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no package {name!r} is installed, and this repository's {name}/ folder is rlvr.{name}: "
                          f"import rlvr.{name} (see pyproject's package-dir)", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
