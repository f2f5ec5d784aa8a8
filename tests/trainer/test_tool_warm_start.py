"""The tool-use warm start (trainer/models/transcripts.py, envs/tool_multiply.py `reference_trajectory`) and the
no-tool baseline switch (`env.tools_enabled=false`).

The learning result itself (GRPO with the tool vs without, over seeds) is bench/bench_tools.py: minutes per
seed, too long for the suite. These checks are the pieces it rests on, each a second or two.
"""

import pytest
import torch

from rlvr.envs import load_env
from rlvr.envs.tool_calls import ToolCall, parse_tool_calls
from rlvr.envs.tool_multiply import NO_TOOLS
from rlvr.trainer.models.tiny_model import build_model, tokenizer_corpus, train_tokenizer
from rlvr.trainer.models.transcripts import transcript_ids
from rlvr.trainer.rollout.agent_loop import observation_text
from rlvr.trainer.rollout.prompts import render_prompts

ARCH = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64, max_positions=160)


@pytest.fixture(scope="module")
def tool_env_tokenizer():
    env = load_env("tool_multiply", digits=3, reference_tool_fraction=1.0)
    return env, train_tokenizer(tokenizer_corpus(env, 200, 0), 512)


def test_transcript_masks_exactly_the_tool_output(tool_env_tokenizer):
    env, tok = tool_env_tokenizer
    row = env.rows("train", 1, seed=3)[0]
    call, observation, answer = env.reference_trajectory(row)
    assert observation == {"role": "tool", "name": "python", "content": str(row["a"] * row["b"])}
    ids, mask = transcript_ids(tok, env, row)
    first = tok(call["content"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    obs = tok(observation_text(tok, [observation], list(env.tools), ended_with_eos=True),
              add_special_tokens=False)["input_ids"]
    last = tok(f"<answer>{row['answer']}</answer>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    # the ids the agent loop holds for this conversation: sampled turn, rendered observation, sampled turn
    assert ids == first + obs + last
    assert mask == [1] * len(first) + [0] * len(obs) + [1] * len(last)
    assert tok.decode([i for i, m in zip(ids, mask) if m == 0]) == "\n<|im_start|>tool\n" + row["answer"] + \
        "<|im_end|>\n<|im_start|>assistant\n"


def test_reference_tool_fraction_picks_a_fixed_share_of_rows_and_no_tools_means_none():
    rows = load_env("tool_multiply", digits=3).rows("train", 400, seed=0)

    def tool_rows(**kwargs):
        env = load_env("tool_multiply", digits=3, **kwargs)
        return {r["id"] for r in rows if len(env.reference_trajectory(r)) == 3}

    half, fifth = tool_rows(reference_tool_fraction=0.5), tool_rows(reference_tool_fraction=0.2)
    assert 160 <= len(half) <= 240 and 50 <= len(fifth) <= 110  # binomial(400, p) within ~4 sd
    assert fifth <= half  # one hash per row: a larger share adds rows, never reshuffles them
    assert tool_rows(reference_tool_fraction=1.0) == {r["id"] for r in rows}
    assert tool_rows(reference_tool_fraction=0.0) == set()
    assert tool_rows(reference_tool_fraction=1.0, tools_enabled=False) == set()
    direct = load_env("tool_multiply", digits=3, reference_tool_fraction=0.0).reference_trajectory(rows[0])
    assert direct == [{"role": "assistant", "content": rows[0]["reference"]}]
    for bad in ({"reference_tool_fraction": 1.5}, {"tools_enabled": "no"}):
        with pytest.raises(Exception, match=next(iter(bad))):
            load_env("tool_multiply", **bad)


def test_no_tool_switch_answers_every_call_without_running_anything():
    env = load_env("tool_multiply", digits=3, tools_enabled=False)
    row = env.rows("test", 1)[0]
    state = env.start(row)
    text = env.reference_trajectory(row)[0]["content"]  # without tools: the direct answer
    call = '<tool_call>{"name": "python", "arguments": {"code": "print(6*7)"}}</tool_call>'
    reply = env.step(row, state, call + call)
    assert not reply.done and reply.tool_calls == 2 and reply.tool_errors == 2
    assert [m["content"] for m in reply.messages] == [NO_TOOLS, NO_TOOLS] and "42" not in str(reply.messages)
    assert env._sandbox is None and state["session"] is None  # no sandbox was ever started
    assert env.step(row, state, text).done  # a direct answer still ends the trajectory
    env.close(state)


def test_warm_start_on_transcripts_teaches_a_parseable_tool_call(tool_env_tokenizer):
    """A 20k-parameter model, 80 supervised steps on tool transcripts: at greedy decoding its first turn is a
    well-formed python call (the rows' digits need not be right; the format is what RL later relies on)."""
    from rlvr.trainer.warm_start import warm_start
    from rlvr.trainer.rollout.hf import HFEngine
    from rlvr.trainer.rollout.types import SamplingParams

    env, tok = tool_env_tokenizer
    torch.manual_seed(0)
    model = build_model(tok, **ARCH, seed=0)
    warm_start(model, tok, env, target_accuracy=[1.0, 1.0], max_steps=80, batch_size=16, lr=1e-2, eval_every=1000,
               eval_rows=4, max_new_tokens=40, seed=0, log=lambda *_: None)
    rows = env.rows("test", 8)
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in render_prompts(tok, env, rows)]
    out = HFEngine(model, tok).generate_ids(prompts, SamplingParams(n=1, max_new_tokens=40, greedy=True))
    calls = [parse_tool_calls(tok.decode(ids, skip_special_tokens=True)) for ids in out.completion_ids]
    parsed = [c for c in calls if len(c) == 1 and isinstance(c[0], ToolCall)]
    assert len(parsed) >= 4, calls
    assert all(c[0].name == "python" and c[0].arguments["code"].startswith("print(") for c in parsed)


def test_cache_key_separates_the_transcript_warm_start_and_keeps_one_turn_keys():
    from rlvr.trainer.models.cache import cache_key, cache_root
    from rlvr.trainer.models.tiny_model import _cache_path, build_fingerprint, tiny_model_path

    tool, arith = load_env("tool_multiply", digits=3), load_env("arithmetic", digits=1)
    config = ({"name": "x"}, {"hidden_size": 8}, {"lr": 1e-3}, 0)
    tool_fp, arith_fp = build_fingerprint(tool), build_fingerprint(arith)
    assert tiny_model_path(tool, *config) == _cache_path(*config, tool_fp, True) != _cache_path(*config, tool_fp)
    old_payload = {"env": config[0], "arch": config[1], "warm_start": config[2], "seed": 0, "build": arith_fp}
    assert tiny_model_path(arith, *config) == cache_root() / "tiny" / cache_key(old_payload)
