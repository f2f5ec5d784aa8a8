"""The python tool's sandbox session (sandboxes/session.py) and the tool environment's use of it
(envs/tool_multiply.py): state persists across calls of one trajectory and never across trajectories;
timeouts, crashes and memory blow-ups leave no container and no state behind; no network, no host."""

from __future__ import annotations

import json

import pytest

from rlvr.sandboxes.base import ExecStatus, Limits, MiB
from rlvr.sandboxes.session import PythonSession

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

LIMITS = Limits(wall_s=2.0, cpu_s=2.0, memory_bytes=128 * MiB, output_bytes=4096)


@pytest.fixture(scope="module")
def client():
    from tests.sandboxes.test_sandbox_docker import require_docker

    return require_docker()


@pytest.fixture(scope="module")
def sandbox(client):
    from rlvr.sandboxes.docker_backend import DockerSandbox

    box = DockerSandbox(pool_size=2)
    yield box
    box.close()


def owned(client, sandbox) -> list:
    from rlvr.sandboxes.pool import INSTANCE_LABEL, list_sandboxes

    return list_sandboxes(client, f"{INSTANCE_LABEL}={sandbox.instance}")


def test_state_persists_within_a_session_and_never_across(sandbox):
    with PythonSession(sandbox, LIMITS) as one, PythonSession(sandbox, LIMITS) as two:
        assert one.run("x = 6 * 7\nprint('set')").stdout == "set\n"
        assert one.run("x + 1").stdout == "43\n"  # a final expression prints its repr, as in a REPL
        assert two.run("x").status is ExecStatus.EXITED and "NameError: name 'x' is not defined" in two.run("x").stderr
        failed = one.run("y = 1\n1 / 0")
        assert failed.exit_code == 1 and "ZeroDivisionError" in failed.stderr and "main.py" not in failed.stderr
        assert "NameError" in one.run("y").stderr  # a failed cell is not kept
        assert one.run("print(x)").stdout == "42\n"  # earlier cells replay silently
    with pytest.raises(RuntimeError, match="after close"):
        one.run("x")


@pytest.mark.slow  # 100 sessions, 17 of them spin to their 1 s limit: about 50 s on 2 cores
def test_100_faulty_trajectories_leave_no_state_and_no_container(client):
    from rlvr.sandboxes.docker_backend import DockerSandbox

    fast = LIMITS.with_(wall_s=1.0, cpu_s=1.0)  # the spinning cell costs its limit, 17 times
    faults = ["while True: pass", "import os; os.kill(os.getpid(), 9)", "b = bytearray(1 << 30)",
              "print('z' * 100000)", "raise SystemExit(3)", "open('/tmp/left', 'w').write('x'); secret = 1"]
    box = DockerSandbox(pool_size=2)
    try:
        statuses = set()
        for i in range(100):
            with PythonSession(box, fast) as session:
                # nothing from an earlier trajectory is visible: no variable, no file
                probe = session.run("import os\nprint(sorted(k for k in globals() if not k.startswith('_')), "
                                    "os.path.exists('/tmp/left'))")
                assert probe.stdout == "['os'] False\n", probe
                statuses.add(session.run(faults[i % len(faults)]).status)
        assert {ExecStatus.TIMEOUT, ExecStatus.MEMORY_LIMIT, ExecStatus.OUTPUT_LIMIT, ExecStatus.EXITED} <= statuses
    finally:
        box.close()
    assert owned(client, box) == []


def test_a_tool_call_reaches_neither_network_nor_host(sandbox):
    with PythonSession(sandbox, LIMITS) as session:
        net = session.run("import socket\ns = socket.socket(); s.settimeout(1)\ns.connect(('1.1.1.1', 53))")
        assert net.exit_code != 0 and ("OSError" in net.stderr or "unreachable" in net.stderr.lower()), net
        host = session.run("import os\nprint(os.path.exists('/work'), os.getuid())")
        assert host.stdout == "False 65534\n"


def test_tool_env_runs_python_calls_in_one_session_per_trajectory():
    from rlvr.envs import load_env

    env = load_env("tool_multiply", digits=3, tool_timeout_s=1.0)
    row = env.rows("train", 1, seed=0)[0]
    with pytest.raises(Exception, match="'tool_memory_mb'"):
        load_env("tool_multiply", tool_memory_mb=0)
    first, second = env.start(row), env.start(row)
    try:
        call = {"name": "python", "arguments": {"code": f"r = {row['a']} * {row['b']}\nr"}}
        reply = env.step(row, first, f"<tool_call>{json.dumps(call)}</tool_call>")
        assert reply.messages == [{"role": "tool", "name": "python", "content": row["answer"]}]
        assert (reply.tool_calls, reply.tool_errors, reply.done) == (1, 0, False)
        again = {"name": "python", "arguments": {"code": "print(r + 1)"}}
        assert env.step(row, first, f"<tool_call>{json.dumps(again)}</tool_call>").messages[0]["content"] == str(int(row["answer"]) + 1)
        other = env.step(row, second, f"<tool_call>{json.dumps(again)}</tool_call>")
        assert "NameError" in other.messages[0]["content"] and other.tool_errors == 1
        bad = env.step(row, first, '<tool_call>{"name": "python"}</tool_call><tool_call>{"name": "sh", "arguments": {}}</tool_call>')
        assert [m["content"][:20] for m in bad.messages] == ["malformed tool call:", "unknown tool 'sh'; a"]
        assert (bad.tool_calls, bad.tool_errors) == (2, 2)
        long = env.step(row, first, '<tool_call>{"name": "python", "arguments": {"code": "print(\'q\' * 500)"}}</tool_call>')
        assert long.output_truncated == 1 and long.messages[0]["content"].endswith("[output truncated: 300 more characters]")
        spin = env.step(row, first, '<tool_call>{"name": "python", "arguments": {"code": "while True: pass"}}</tool_call>')
        assert spin.messages[0]["content"].endswith("[timeout]") and spin.tool_errors == 1
        assert env.step(row, first, f"<answer>{row['answer']}</answer>").done
    finally:
        env.close(first)
        env.close(second)
        env.close_sandbox()


class ScriptedEngine:
    """An engine that 'samples' a fixed message per turn (its ids, then EOS), cycling through `script` by turn."""

    context_length = None

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script = tokenizer, script

    def generate_ids(self, prompt_ids, params):
        import torch

        from rlvr.trainer.rollout.types import Rollout

        tok, out = self.tokenizer, []
        for ids in prompt_ids:
            turn = tok.decode(ids).count("<|im_start|>assistant") - 1
            out.append(tok(self.script(turn), add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
        return Rollout([list(p) for p in prompt_ids], out, [tok.decode(c, skip_special_tokens=True) for c in out],
                       [torch.full((len(c),), -0.5) for c in out], [False] * len(out))


def test_tool_trajectories_through_the_agent_loop(tiny_lm):
    """tool_multiply end to end on the sandbox: a call, its output as the tool's (masked) observation, the answer
    copied from it scores 1; a malformed call is answered and counted as a tool error."""
    from rlvr.envs import load_env
    from rlvr.trainer.rollout.agent_loop import run_trajectories, trajectory_metrics
    from rlvr.trainer.rollout.types import SamplingParams

    env = load_env("tool_multiply", digits=2, max_turns=3)
    row = env.rows("test", 1)[0]
    call = json.dumps({"name": "python", "arguments": {"code": f"r = {row['a']} * {row['b']}\nprint(r)"}})
    good = ScriptedEngine(tiny_lm.tokenizer, lambda turn: [f"<tool_call>{call}</tool_call>",
                                                           f"<answer>{row['answer']}</answer>"][min(turn, 1)])
    bad = ScriptedEngine(tiny_lm.tokenizer, lambda turn: "<tool_call>{print(1)}</tool_call>")
    try:
        [done] = run_trajectories(good, env, [row], SamplingParams(n=1, max_new_tokens=200)).trajectories
        assert (done["end"], done["turns"], done["tool_calls"], done["tool_errors"]) == ("done", 2, 1, 0)
        role, observation, mask = done["segments"][1]
        assert role == "environment" and mask == 0
        assert tiny_lm.tokenizer.decode(observation) == f"\n<|im_start|>tool\n{row['answer']}<|im_end|>\n<|im_start|>assistant\n"
        assert env.score_trajectories([done["messages"]], [row])[0].reward == 1.0
        rollout = run_trajectories(bad, env, [row], SamplingParams(n=2, max_new_tokens=200))
        assert [t["end"] for t in rollout.trajectories] == ["max_turns"] * 2
        metrics = trajectory_metrics(rollout.trajectories)
        assert metrics["tool_calls/mean"] == 3 and metrics["tool/error_frac"] == 1.0 and metrics["turns/mean"] == 3
        assert "malformed tool call: not valid JSON" in rollout.trajectories[0]["messages"][2]["content"]
    finally:
        env.close_sandbox()
