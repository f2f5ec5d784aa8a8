"""guess_number's warm-start transcript is a game the environment itself plays out: a binary search whose replies
are the env's own, ending at the secret within `max_turns` (envs/guess_number.py, trainer/models/transcripts.py)."""

from rlvr.envs import load_env
from rlvr.trainer.models.transcripts import has_transcripts


def replay(env, row, messages):
    """The replies `env.step` gives to the transcript's guesses, and whether the game ended."""
    state, replies, done = env.start(row), [], False
    for message in messages:
        if message["role"] != "assistant":
            continue
        reply = env.step(row, state, message["content"])
        replies.append(None if reply.done else reply.messages[0]["content"])
        done = reply.done
    return replies, done


def test_the_reference_trajectory_is_a_binary_search_the_game_agrees_with():
    env = load_env("guess_number")  # high 16, max_turns 5: a binary search finds every secret
    assert has_transcripts(env)
    for secret in range(1, 17):
        row = env._row(secret)
        messages = env.reference_trajectory(row)
        assert [m["role"] for m in messages] == ["assistant", "user"] * (len(messages) // 2) + ["assistant"]
        assert messages[0]["content"] == "<think></think><answer>8</answer>"
        assert messages[-1]["content"] == row["reference"] and len(messages) // 2 + 1 <= 5
        replies, done = replay(env, row, messages)
        assert done and replies[:-1] == [m["content"] for m in messages if m["role"] == "user"]


def test_the_reference_trajectory_stops_at_max_turns():
    env = load_env("guess_number", high=100, max_turns=3)
    row = env._row(1)
    messages = env.reference_trajectory(row)
    guesses = [m["content"] for m in messages if m["role"] == "assistant"]
    assert guesses == [f"<think></think><answer>{n}</answer>" for n in (50, 25, 12)]
    assert messages[-1]["role"] == "assistant" and replay(env, row, messages) == (["lower", "lower", "lower"], False)
