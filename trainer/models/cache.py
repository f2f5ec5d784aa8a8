"""RLVR_CACHE: where built models live (`tiny/`, `gguf/`), their keys, and building one entry once.

An entry is a directory that is complete when its `ready` file exists (written last). Processes that ask for
the same entry at once (parallel tests, ranks, two runs started together) build it once: the others wait on a
lock file beside it, then find it ready. A builder writes into `<entry>.tmp` and renames it, so a killed build
never leaves a half-written entry; what a long build has done so far it may keep beside the entry, under the lock
(the tiny model's warm start: `<entry>.partial.pt`), for the next build to resume from.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr"))


def cache_key(payload: dict) -> str:
    blob = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_once(path: Path, ready: str, build: Callable[[], None], what: str, log=print) -> Path:
    """`path`, after `build()` has made it unless `path/ready` already exists; `what` names it in the log."""
    if (path / ready).exists():
        log(f"{what}: cached at {path}")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"{what}: another process is building {path}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when that process's build ends (or it dies)
        if (path / ready).exists():
            log(f"{what}: cached at {path}")
            return path
        build()
    return path
