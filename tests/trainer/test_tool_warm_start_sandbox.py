"""The tool-use warm start computes its tool observations without a sandbox (envs/tool_multiply.py
`reference_trajectory`); here the sandbox runs the same calls and must print exactly those observations,
so the warm start teaches what RL will see."""

import pytest

from rlvr.envs import load_env

pytestmark = pytest.mark.xdist_group("sandbox")


def test_reference_observation_is_what_the_sandbox_prints():
    env = load_env("tool_multiply", digits=3, sandbox_backend="local", reference_tool_fraction=1.0)
    try:
        for row in env.rows("train", 2, seed=5):
            call, observation, _ = env.reference_trajectory(row)
            state = env.start(row)
            try:
                reply = env.step(row, state, call["content"])
            finally:
                env.close(state)
            assert reply.tool_calls == 1 and reply.tool_errors == 0
            assert reply.messages == [observation]
    finally:
        env.close_sandbox()
