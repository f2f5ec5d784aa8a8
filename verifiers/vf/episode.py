"""A multi-turn `verifiers` environment (its `Env.run`) stepped turn by turn by rlvr, in a worker process.

In verifiers 0.4 (the `verifiers.v1` API) a multi-turn environment is a taskset package that also exports an
`Env` subclass: its config (an `EnvConfig` subclass) declares each role as an `AgentConfig` field, and its
`run(task, agents)` is the control flow of the conversation. It opens `agents.<role>.interaction(task)` and
calls `await interaction.turn(message)`: one user message in, one `Segment` (the assistant's reply) out, or a
`terminated` segment once a limit (`AgentConfig.max_turns`) or a task's `@vf.stop` predicate ends the exchange.
What `run` computes between two turns is the environment's response; when `run` returns the exchange is over,
and the task's `@vf.reward` functions score the whole trace (then `Env.finalize`, the env's own judgement).
verifiers itself drives `turn` through a harness program that calls the model over an OpenAI endpoint
(`Rollout`, `interception/`); rlvr samples the assistant's tokens itself (trainer/rollout/agent_loop.py),
so here `agents` is a stand-in whose `turn` answers with the replies rlvr sampled.

How a step runs (read in verifiers 0.4.0: env.py `Env.run_episode`, agent.py `Interaction.turn` and
`Segment`, session.py `RolloutSession.refused` for limits and `@stop`s before each model call, task.py
`Task.score`): rlvr keeps no coroutine alive between turns. Each step replays `run` from its start in a
`TimeLimitPool` worker with the replies sampled so far: `turn` number k answers with reply k, and the turn
that asks for one reply more unwinds `run` (`_NeedReply`, a BaseException so the environment's own
`except Exception` does not swallow it) and hands its user message back as the environment's response.
So a worker holds no per-trajectory state, a hanging or crashing `run` costs one killed worker and one
trajectory, and the step's time limit is enforced from outside (verifiers/pool.py). The price: `run` must be
a deterministic function of the task and the replies (each replay re-seeds Python's `random` with the task
key, so a game that draws a secret draws the same one every replay, and every trajectory of one task gets
the same secret; a replay whose turns say other than the previous step's said is refused, naming the turn),
and a trajectory of T turns runs `run` T + 1 times (cheap for the environment's own Python; nothing here
samples).

Refused by name, when the environment is loaded: more than one role (a second agent, such as the
`user-sim` env's modelled user, would need a model of its own), a role pinned to a harness other than
`null` (a harness program with tools of its own), tools served as `Toolset`s (MCP servers), `@vf.stop`
predicates on a `Request` or a `Response` and `@vf.intercept` hooks (they rewrite or judge model calls
rlvr never makes), tasks that need a container. At run time: an interaction given `runtime=` or `tools=`,
`send`/`steer`, and a second interaction in one episode end the trajectory as an error naming the call.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from contextlib import asynccontextmanager
from typing import Any

from rlvr.verifiers.vf.worker import load_tasks, prompt_messages

_ENVS: dict[tuple[str, str, str], tuple[Any, dict[str, Any], list, int | None]] = {}


class _NeedReply(BaseException):
    """Raised by a turn that needs a reply not sampled yet; carries the user message it was given."""

    def __init__(self, message: str | None):
        super().__init__(message)
        self.message = message


def env_class(taskset: str) -> type | None:
    """The `Env` subclass the taskset package exports, or None (a single-turn taskset)."""
    from verifiers.v1.envs.single_agent import SingleAgentEnv
    from verifiers.v1.utils.loaders import environment_class

    cls = environment_class(taskset)
    return None if cls is SingleAgentEnv else cls


def load_env(taskset: str, args: Mapping[str, Any], env_args: Mapping[str, Any]) -> tuple[Any, str, Any, list]:
    """(the package's Env, configured; its one role's name; that role's AgentConfig; the task's `@vf.stop`s on
    a Trace). ValueError naming what cannot map (module docstring)."""
    from verifiers.v1.configs.agent import agent_config_fields
    from verifiers.v1.session import hook_boundary
    from verifiers.v1.trace import Trace
    from verifiers.v1.utils.decorators import discover_decorated
    from verifiers.v1.utils.loaders import env_config_type

    cls = env_class(taskset)
    if cls is None:
        raise ValueError(f"vf: taskset {taskset!r} exports no Env subclass: it is single-turn")
    try:
        config = env_config_type(taskset).model_validate({**dict(env_args), "taskset": {**dict(args), "id": taskset}})
        env = cls(config)
    except Exception as error:  # pydantic's ValidationError names the field
        raise ValueError(f"vf: {taskset!r}'s environment {cls.__name__} refused env.env_args {dict(env_args)!r} "
                         f"or env.taskset_args {dict(args)!r}: {error}") from error
    roles = agent_config_fields(config)
    if len(roles) != 1:
        raise ValueError(f"vf: {taskset!r}'s environment {cls.__name__} has roles {', '.join(roles)}; rlvr's policy "
                         f"plays exactly one (a second agent, e.g. a modelled user, needs a model of its own)")
    (role, agent), = roles.items()
    if agent.harness is not None and agent.harness.id != "null":
        raise ValueError(f"vf: {taskset!r}'s environment {cls.__name__}: its role {role!r} is pinned to the harness {agent.harness.id!r}; rlvr samples "
                         f"each turn itself, so only an unpinned role or the tool-less 'null' harness is supported")
    task_cls = type(env.taskset).task_type()
    toolsets = [*env.taskset.toolsets(env.taskset.config), *task_cls.toolsets(env.taskset.config.task)]
    if toolsets:
        raise ValueError(f"vf: {taskset!r}'s environment {cls.__name__}: the taskset serves tools as Toolsets ({', '.join(type(t).__name__ for t in toolsets)}, "
                         f"MCP servers a harness calls); rlvr does not serve them")
    probe = next(iter(env.taskset), None)
    stops = []
    if probe is not None:
        if discover_decorated(probe, "intercept"):
            raise ValueError(f"vf: {taskset!r}'s environment {cls.__name__}: its task {type(probe).__name__} has @vf.intercept hooks; they rewrite model "
                             f"calls, which rlvr makes itself, so they are not supported")
        for fn in probe.hooks("stop"):
            if hook_boundary(fn, allow_trace=True) is not Trace:
                raise ValueError(f"vf: {taskset!r}'s environment {cls.__name__}: the task's @vf.stop {fn.__name__!r} reads a Request or a Response; only "
                                 f"@vf.stop predicates on the Trace are supported")
            stops.append(fn.__name__)
    return env, role, agent, stops


def _cached(taskset: str, args_json: str, env_args_json: str, limit: int) -> tuple[Any, dict[str, Any], str, Any]:
    cache = (taskset, args_json, env_args_json)
    if cache not in _ENVS:
        env, role, agent, _ = load_env(taskset, json.loads(args_json), json.loads(env_args_json))
        tasks = {t.key: t for t in load_tasks(taskset, json.loads(args_json), limit)}
        _ENVS[cache] = (env, tasks, role, agent)
    return _ENVS[cache]


class _Interaction:
    """The part of verifiers' `Interaction` an environment's `run` uses, answered from `replies`."""

    def __init__(self, task: Any, trace: Any, replies: list[str], final: bool, max_turns: int | None,
                 said_before: list[str | None] | None):
        self.task, self.trace, self._replies, self._final, self._max_turns = task, trace, replies, final, max_turns
        self._said_before = said_before or []
        self.said: list[str | None] = []  # the message of each turn() call, in order (None: a bare opening turn)
        self._used = 0
        self._started = False
        self._over = False

    def _append(self, message: Any, sampled: bool = False) -> None:
        import verifiers.v1 as vf

        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        self.trace.nodes.append(vf.MessageNode(parent=parent, sampled=sampled, message=message))

    async def _refused(self) -> bool:
        """verifiers' checks before each model call (session.py `refused`): the role's turn limit, then each
        `@vf.stop` on the Trace; the first that holds becomes the trace's stop condition."""
        from verifiers.v1.session import call_hook
        from verifiers.v1.trace import Trace

        if self._max_turns is not None and self.trace.num_turns >= self._max_turns:
            self.trace.stop("max_turns")
            return True
        for stop in self.task.hooks("stop"):
            result = await call_hook(stop, {Trace: self.trace})
            if not isinstance(result, bool):
                raise TypeError(f"@vf.stop {stop.__name__!r} must return bool, got {type(result).__name__}")
            if result:
                self.trace.stop(stop.__name__)
                return True
        return False

    async def turn(self, message: str | None = None) -> Any:
        import verifiers.v1 as vf

        if self._over:
            return vf.Segment(messages=[], terminated=True)
        prompted = self.task.data.prompt is not None
        if not self._started and prompted and message is not None:
            raise ValueError("a prompted task speaks first: take its opening reply with a bare turn() "
                             "(verifiers' Interaction.turn)")
        if message is None and not (prompted and not self._started):
            raise ValueError("turn() needs a user message (only a prompted task's opening turn is bare)")
        if message is not None:
            if not isinstance(message, str) or not message.strip():
                raise ValueError(f"turn() takes a non-empty user message string, got {message!r}")
            self._append(vf.UserMessage(content=message))
        k = len(self.said)
        if k < len(self._said_before) and self._said_before[k] != message:
            raise ValueError(f"run() is not a deterministic function of the task and the replies: replayed, its turn "
                             f"{k + 1} said {message!r} where it first said {self._said_before[k]!r} (rlvr replays run() "
                             f"for each step; see verifiers/vf/episode.py)")
        self.said.append(message)
        self._started = True
        if await self._refused():
            self._over = True
            return vf.Segment(messages=[], terminated=True)
        if self._used == len(self._replies):
            if not self._final:
                raise _NeedReply(message)
            self.trace.stop("user_closed")  # rlvr ended the trajectory (its turn or token limit): the exchange ends
            self._over = True
            return vf.Segment(messages=[], terminated=True)
        reply = vf.AssistantMessage(content=self._replies[self._used])
        self._used += 1
        self._append(reply, sampled=True)
        return vf.Segment(messages=[reply])

    async def send(self, *args, **kwargs):
        raise ValueError("Interaction.send is not supported under rlvr (each turn is one user message via turn())")

    async def steer(self, *args, **kwargs):
        raise ValueError("Interaction.steer is not supported under rlvr (each turn is one user message via turn())")


class _Agent:
    """One role's stand-in: `interaction(task)` as verifiers' `Agent` has it, `run(task)` as one turn."""

    def __init__(self, episode: _Episode):
        self._episode = episode
        self.trainable = True

    @asynccontextmanager
    async def interaction(self, task: Any, *, runtime: Any = None, tools: Any = None, on_trace: Any = None):
        if runtime is not None or tools is not None:
            raise ValueError("interaction(runtime=..., tools=...) is not supported under rlvr (no runtime, no MCP tools)")
        yield self._episode.open(task)

    async def run(self, task: Any, **kwargs: Any) -> Any:
        if kwargs.get("runtime") is not None or kwargs.get("tools") is not None:
            raise ValueError("run(runtime=..., tools=...) is not supported under rlvr (no runtime, no MCP tools)")
        interaction = self._episode.open(task)
        if task.data.prompt is None:
            raise ValueError("agent.run(task) of a task without a prompt: open it with interaction().turn(message)")
        await interaction.turn()
        return interaction.trace


class _Agents:
    def __init__(self, role: str, agent: _Agent):
        self._role, self._agent = role, agent

    def __getattr__(self, name: str) -> _Agent:
        if name.startswith("_") or name != self._role:
            raise AttributeError(f"no agent {name!r}; this environment's one role is {self._role!r}")
        return self._agent


class _Episode:
    def __init__(self, replies: list[str], final: bool, max_turns: int | None, said_before: list[str | None] | None):
        self.replies, self.final, self.max_turns, self.said_before = replies, final, max_turns, said_before
        self.interaction: _Interaction | None = None

    def open(self, task: Any) -> _Interaction:
        import verifiers.v1 as vf
        from verifiers.v1.state import state_cls

        if self.interaction is not None:
            raise ValueError("a second interaction (or run) in one episode is not supported under rlvr: one "
                             "trajectory is one conversation")
        trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                         state=state_cls(type(task))(), agent=vf.AgentInfo(config=vf.AgentConfig()))
        self.interaction = _Interaction(task, trace, self.replies, self.final, self.max_turns, self.said_before)
        for message in prompt_messages(task.data) if task.data.prompt is not None else (
                [{"role": "system", "content": task.data.system_prompt}] if task.data.system_prompt else []):
            kind = {"system": vf.SystemMessage, "user": vf.UserMessage, "assistant": vf.AssistantMessage}[message["role"]]
            self.interaction._append(kind(content=message["content"]))
        return self.interaction


def _replay(taskset: str, args_json: str, env_args_json: str, limit: int, key: str, replies: list[str],
            final: bool, said_before: list[str | None] | None = None) -> tuple[_Episode, Any, Any, str | None, bool]:
    """Run the environment's `run` on the task with `replies`; (episode, env, task, the pending user message,
    whether `run` returned)."""
    env, tasks, role, agent = _cached(taskset, args_json, env_args_json, limit)
    if key not in tasks:
        raise KeyError(f"taskset {taskset!r} has no task with key {key[:16]}...")
    task = tasks[key]
    random.seed(key)
    episode = _Episode(list(replies), final, agent.max_turns, said_before)
    agents = _Agents(role, _Agent(episode))

    async def play() -> None:
        await env.setup(agents)
        await env.run(task, agents)

    try:
        asyncio.run(play())
    except _NeedReply as need:
        return episode, env, task, need.message, False
    if episode.interaction is None:
        raise ValueError(f"{type(env).__name__}.run() opened no interaction with its role {role!r}")
    return episode, env, task, None, True


def step(taskset: str, args_json: str, env_args_json: str, limit: int, key: str, replies: list[str],
         said_before: list[str | None] | None = None) -> dict:
    """What the environment does after `replies`: {"done": True} or {"done": False, "message": the next user message
    (None where the task's own prompt is the opening)}, with "said": the message of every turn() call so far. A
    replay whose turns say other than `said_before` (what the last step's replay said) is refused: ValueError.
    Runs in a `TimeLimitPool` worker."""
    episode, _, _, message, done = _replay(taskset, args_json, env_args_json, limit, key, replies, final=False,
                                           said_before=said_before)
    said = episode.interaction.said if episode.interaction is not None else []
    return {"done": True, "said": said} if done else {"done": False, "message": message, "said": said}


def score(taskset: str, args_json: str, env_args_json: str, limit: int, key: str, replies: list[str]) -> dict:
    """{"reward", "rewards", "metrics", "stop"} of the whole conversation: `run` replayed to its end (a turn past
    the replies ends the exchange as verifiers' limits do), the task's rewards on the trace, then `Env.finalize`."""
    import verifiers.v1 as vf

    episode, env, task, _, _ = _replay(taskset, args_json, env_args_json, limit, key, replies, final=True)
    trace = episode.interaction.trace
    trace.is_completed = True

    async def judge() -> None:
        await task.score(trace)
        if type(env).finalize is not vf.Env.finalize:
            record = vf.Episode(task=trace.task, traces=[trace])
            await env.finalize(task, record)

    asyncio.run(judge())
    return {"reward": float(trace.reward),
            "rewards": {name: [r.score, r.weight] for name, r in trace.rewards.items() if r is not None},
            "metrics": {name: v for name, v in trace.metrics.items() if v is not None},
            "stop": trace.stop_condition}
