"""How many CPU threads torch's matmuls use in `rlvr train` (`threads`): auto | N | 0.

    auto  the default: one thread while the run is built (the tiny model's warm start, a GGUF conversion), then,
          once the policy exists, one thread for a model under 10M parameters and, from 10M up, every core
          (torch's default when rlvr was imported) that no other process is using, looked at again before
          every step; the start-up log names the choice and the parameter count, and a line names each change
    N     N threads from the start
    0     torch's thread setting as it is (every core unless something set it)

Why the model decides, measured on this project's 2-core CPU: the built-in 0.84M tiny model gains nothing from a
second thread (40 GRPO steps: 12 s either way, idle), and on a loaded machine the extra thread spins (about 10x
slower); SmolLM2-135M-Instruct's GRPO update of 8 x 8 completions took 61.8 s on one thread and 35.5 s on two
(0.57x; bench/bench_update.py, docs/benchmarks/grpo-trl.md). Only those two sizes were measured: the 10M line sits
between them, and `threads=N` overrides it either way.

Why the load decides too, measured on the same CPU with a SmolLM2-135M-shaped forward and backward of 8 x 88
tokens beside one `while True: pass` process (and other work: load 17-34): two threads took 135-167 s a pass
(28-29 s of CPU), one thread 57-77 s (8 s of CPU). A thread that shares its core with another process makes
every parallel region wait for it, and the waiting thread spins: two threads degrade far worse than the half of
the CPU the run still gets. So `auto` counts the other processes that are running (`procs_running` in
/proc/stat, the fewest of a few reads 10 ms apart, less this thread) and takes the cores they leave, at least
one. Where this process cannot see the whole machine (an affinity mask or /proc/stat that is not its own), the
load is not read and every core is kept.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from rlvr.errors import ConfigError

AUTO_MIN_PARAMETERS = 10_000_000  # from here up, `auto` uses every core
TORCH_DEFAULT = torch.get_num_threads()  # torch's own choice, before rlvr set anything


def check_threads(value) -> None:
    """A ConfigError naming `threads` unless it is auto or a whole number >= 0."""
    if not (value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)):
        raise ConfigError(f"threads={value!r}; choose auto (by the model's size), 0 (torch's default: every core) "
                          f"or a number of threads >= 1")


def set_start_threads(value) -> None:
    """What the run computes with before its policy exists (the set-up's first line; `value` already checked by
    validate_train_config)."""
    if value == "auto":
        torch.set_num_threads(1)
    elif value:
        torch.set_num_threads(value)


@dataclass
class ModelThreads:
    """What `set_model_threads` chose: the start-up log line (None unless `auto`), and whether the count follows
    the load before every step (`auto` with a policy from 10M up, on a machine whose load this process can read)."""

    line: str | None = None
    follow: bool = False

    def before_step(self) -> str | None:
        """Move the thread count to the cores the other processes now leave; a log line when it changed."""
        if not self.follow:
            return None
        threads, others = free_cores()
        before = torch.get_num_threads()
        if others is None or threads == before:
            return None
        torch.set_num_threads(threads)
        return (f"threads: {before} -> {threads} (threads=auto: {others} other running "
                f"process{'es' if others != 1 else ''} on {TORCH_DEFAULT} cores)")


def set_model_threads(value, model: torch.nn.Module) -> ModelThreads:
    """`auto`: the thread count for `model`, set now, and the start-up log line; nothing for any other value."""
    if value != "auto":
        return ModelThreads()
    parameters = sum(p.numel() for p in model.parameters())
    if parameters < AUTO_MIN_PARAMETERS:
        torch.set_num_threads(1)
        return ModelThreads(f"threads: 1 (threads=auto: {parameters / 1e6:.1f}M parameters; one thread under "
                            f"{AUTO_MIN_PARAMETERS // 1_000_000}M; threads=N sets it)")
    threads, others = free_cores()
    torch.set_num_threads(threads)
    load = ("; the load is not this process's to read: every core" if others is None else
            f", {others} other running process{'es' if others != 1 else ''}, looked at again before every step")
    return ModelThreads(f"threads: {threads} (threads=auto: {parameters / 1e6:.1f}M parameters; every free core "
                        f"from {AUTO_MIN_PARAMETERS // 1_000_000}M: {TORCH_DEFAULT} cores{load}; threads=N sets it)",
                        follow=others is not None)


def free_cores(reads: int = 5, gap_s: float = 0.01) -> tuple[int, int | None]:
    """(threads to use, other running processes): torch's default count less the processes other than this
    thread that are running, at least 1; (the default, None) where the load cannot be read as this machine's."""
    others = _others_running(reads, gap_s)
    if others is None:
        return TORCH_DEFAULT, None
    return max(1, TORCH_DEFAULT - others), others


def _others_running(reads: int, gap_s: float) -> int | None:
    """The fewest running tasks (threads) on the machine besides this one over `reads` reads of /proc/stat;
    None when this process may not use every CPU the kernel counts (a mask, a container's share)."""
    if len(os.sched_getaffinity(0)) != os.cpu_count() or TORCH_DEFAULT != os.cpu_count():
        return None
    fewest = None
    for i in range(reads):
        if i:
            time.sleep(gap_s)  # our own pool's threads stop spinning within a few ms of the last step
        running = _procs_running()
        if running is None:
            return None
        fewest = running if fewest is None else min(fewest, running)
    return max(0, fewest - 1)


def _procs_running() -> int | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None
