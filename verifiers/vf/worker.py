"""A `verifiers` (PrimeIntellect's environments library, PyPI `verifiers` 0.4.x) taskset, read and scored here.

Everything that touches the `verifiers.v1` API is in this file: the environment (envs/vf/env.py) lists tasks
through `load_tasks`, and the `vf` verifier (verifiers/vf/verifier.py) scores completions with `score` inside
its worker processes, where a task's own reward functions run under a wall-clock limit the parent enforces.

What is used of that API (read in verifiers 0.4.0, verifiers/v1): a taskset package exports its `Taskset`
subclass in `__all__` and is found by its import name (`utils/loaders.py`: `taskset_class`,
`taskset_config_type`); iterating a taskset yields `Task`s whose `data` (a `TaskData`) holds `prompt`
(a string or chat messages), `system_prompt` and the task's own fields; `Task.score(trace)` runs the task's
`@vf.reward` and `@vf.metric` functions (and config-plugged ones) on a `Trace` and records them there, and
`Trace.reward` is their weighted sum. rlvr samples the completion itself, so the trace it scores holds the
prompt and one sampled assistant message, as verifiers' own single-turn harness would record them; reward
functions that need a runtime (a container) are skipped by `Task.score` when none is given, and a task that
needs a container (`NEEDS_CONTAINER`) is refused when the tasks are loaded.

Importing this module imports `verifiers.v1` (several seconds): envs/vf/env.py imports it only when an
environment is built, never at registration.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from typing import Any

ROLES = ("system", "user", "assistant")
try:  # imported with the module so a worker pays it in its start-up, before any item's clock starts
    import verifiers.v1  # noqa: F401
    import verifiers.v1.tasksets  # noqa: F401  (2-3 s more: how a taskset id is looked up imports it)
except ModuleNotFoundError:  # reported by load_tasks, by name
    pass

_TASKSETS: dict[tuple[str, str], dict[str, Any]] = {}  # (taskset id, its config as JSON) -> {task key: Task}


def load_tasks(taskset: str, args: Mapping[str, Any], limit: int) -> list[Any]:
    """The first `limit` tasks of the installed taskset package `taskset`, configured with `args`.

    ValueError (naming the package or the field) for a package that is not installed, exports no Taskset,
    refuses `args`, or needs a container."""
    try:
        from verifiers.v1.utils.loaders import taskset_class, taskset_config_type
    except ModuleNotFoundError as error:
        raise ValueError("env=vf:NAME needs the `verifiers` package (pip install 'rlvr[vf]')") from error
    try:
        cls, config_type = taskset_class(taskset), taskset_config_type(taskset)
    except (ModuleNotFoundError, TypeError, AttributeError, ValueError) as error:
        raise ValueError(f"vf: taskset {taskset!r} could not be loaded: {error}") from error
    try:
        config = config_type.model_validate({**dict(args), "id": taskset})
    except Exception as error:  # pydantic's ValidationError names the field
        raise ValueError(f"vf: taskset {taskset!r} refused env.taskset_args {dict(args)!r}: {error}") from error
    tasks = list(itertools.islice(iter(cls(config)), limit))  # an INFINITE taskset too: the first `limit`
    if not tasks:
        raise ValueError(f"vf: taskset {taskset!r} yielded no tasks")
    needs = sorted({type(t).__name__ for t in tasks if getattr(t, "NEEDS_CONTAINER", False)})
    if needs:
        raise ValueError(f"vf: taskset {taskset!r} has tasks that need a container ({', '.join(needs)}); "
                         f"rlvr scores verifiers tasks without a runtime, so only tasks that do not are supported")
    return tasks


def prompt_messages(data: Any) -> list[dict[str, str]]:
    """A task's prompt as rlvr's chat messages: its system prompt, then its prompt (a string or messages)."""
    from verifiers.v1.types import content_text

    messages = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    if isinstance(data.prompt, str):
        messages.append({"role": "user", "content": data.prompt})
    else:
        messages += [{"role": m.role, "content": content_text(m.content)} for m in data.prompt or []]
    odd = sorted({m["role"] for m in messages} - set(ROLES))
    if odd:
        raise ValueError(f"vf: task {data.idx}'s prompt has {', '.join(odd)} messages; a single-turn prompt holds "
                         f"{', '.join(ROLES)} messages only")
    return messages


def score(taskset: str, args_json: str, limit: int, key: str, completion: str) -> dict[str, Any]:
    """{"reward", "rewards": {name: [score, weight]}, "metrics"} of `completion` for the task `key`.

    Runs in a `TimeLimitPool` worker; the taskset is loaded once per worker and kept."""
    tasks = _TASKSETS.get((taskset, args_json))
    if tasks is None:
        tasks = {t.key: t for t in load_tasks(taskset, json.loads(args_json), limit)}
        _TASKSETS[(taskset, args_json)] = tasks
    if key not in tasks:
        raise KeyError(f"taskset {taskset!r} has no task with key {key[:16]}...")
    task = tasks[key]
    trace = single_turn_trace(task, completion)
    asyncio.run(task.score(trace))
    return {"reward": float(trace.reward),
            "rewards": {name: [r.score, r.weight] for name, r in trace.rewards.items() if r is not None},
            "metrics": {name: v for name, v in trace.metrics.items() if v is not None}}


def single_turn_trace(task: Any, completion: str) -> Any:
    """The trace verifiers would record for one sampled reply to the task's prompt."""
    import verifiers.v1 as vf

    nodes = []
    for message in prompt_messages(task.data):
        kind = {"system": vf.SystemMessage, "user": vf.UserMessage, "assistant": vf.AssistantMessage}[message["role"]]
        nodes.append(vf.MessageNode(parent=len(nodes) - 1 if nodes else None, message=kind(content=message["content"])))
    nodes.append(vf.MessageNode(parent=len(nodes) - 1 if nodes else None, sampled=True,
                                message=vf.AssistantMessage(content=completion)))
    return vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                    agent=vf.AgentInfo(config=vf.AgentConfig()), nodes=nodes)

