"""How many CPU threads torch's matmuls use in `rlvr train` (`threads`): auto | N | 0.

    auto  the default: one thread while the run is built (the tiny model's warm start, a GGUF conversion), then,
          once the policy exists, one thread for a model under 10M parameters and every core (torch's default
          when rlvr was imported) from 10M up; the start-up log names the choice and the parameter count
    N     N threads from the start
    0     torch's thread setting as it is (every core unless something set it)

Why the model decides, measured on this project's 2-core CPU: the built-in 0.84M tiny model gains nothing from a
second thread (40 GRPO steps: 12 s either way, idle), and on a loaded machine the extra thread spins (about 10x
slower); SmolLM2-135M-Instruct's GRPO update of 8 x 8 completions took 61.8 s on one thread and 35.5 s on two
(0.57x; bench/bench_update.py, docs/benchmarks/grpo-trl.md). Only those two sizes were measured: the 10M line sits
between them, and `threads=N` overrides it either way.
"""

from __future__ import annotations

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


def set_model_threads(value, model: torch.nn.Module) -> str | None:
    """`auto`: the thread count for `model` (set now); returns the start-up log line, None for any other value."""
    if value != "auto":
        return None
    parameters = sum(p.numel() for p in model.parameters())
    threads = TORCH_DEFAULT if parameters >= AUTO_MIN_PARAMETERS else 1
    torch.set_num_threads(threads)
    rule = "every core from" if parameters >= AUTO_MIN_PARAMETERS else "one thread under"
    return (f"threads: {threads} (threads=auto: {parameters / 1e6:.1f}M parameters; {rule} "
            f"{AUTO_MIN_PARAMETERS // 1_000_000}M; threads=N sets it)")
