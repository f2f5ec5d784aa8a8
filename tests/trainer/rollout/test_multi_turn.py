"""Multi-turn rollouts (trainer/rollout/agent_loop.py, envs/multi_turn.py): the ids trained on are the ids the
engine sampled, the environment's tokens are exactly the ones masked out, and the losses ignore them.

The chat template here drops earlier assistant turns' `<think>` blocks, as Qwen3's does; the tiny SFT model writes
`<think></think><answer>N</answer>` every turn, so re-rendering a finished conversation through this template
gives other ids than the ones sampled, which the test checks too (otherwise it could not fail for that reason).
"""

from __future__ import annotations

import copy

import pytest
import torch

from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.trainer.algos.losses import grpo_loss
from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.rollout.agent_loop import observation_text, run_trajectories, trajectory_metrics
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.rollout.types import SamplingParams

THINK_DROPPING_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message.role == 'assistant' -%}"
    "{%- set content = message.content -%}"
    "{%- if not loop.last and '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}"
    "{{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{{- '<|im_start|>user\n<tool_response>\n' + message.content + '\n</tool_response><|im_end|>\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


class EchoEnv(MultiTurnEnv):
    """Replies to every message with a tool message naming the turn, until `max_turns`."""

    name = "echo"
    default_reward = [{"verifier": "exact", "weight": 1.0}]

    def rows(self, split, n, seed=0):
        return [{"id": f"echo/{i}", "messages": [{"role": "user", "content": f"{i}+1="}], "answer": str(i + 1),
                 "reference": ""} for i in range(n)]

    def start(self, row):
        return {"turn": 0, "closed": False}

    def step(self, row, state, assistant_text):
        state["turn"] += 1
        return Reply([{"role": "tool", "content": f"seen {state['turn']}"}], tool_calls=1, tool_errors=state["turn"] % 2)

    def close(self, state):
        state["closed"] = True


class RecordingEngine:
    """An HFEngine whose every generate_ids call (ids in, ids out) is kept."""

    def __init__(self, engine):
        self.engine, self.tokenizer, self.calls = engine, engine.tokenizer, []
        self.context_length = engine.context_length

    def generate_ids(self, prompt_ids, params):
        out = self.engine.generate_ids(prompt_ids, params)
        self.calls.append(([list(p) for p in prompt_ids], [list(c) for c in out.completion_ids]))
        return out


@pytest.fixture
def think_dropping(tiny_lm_sft):
    tok = copy.deepcopy(tiny_lm_sft.tokenizer)
    tok.chat_template = THINK_DROPPING_TEMPLATE
    return tok


def test_training_ids_are_the_sampled_ids_and_the_mask_is_exactly_the_environments(tiny_lm_sft, think_dropping):
    torch.manual_seed(0)
    engine = RecordingEngine(HFEngine(tiny_lm_sft.model(), think_dropping))
    assert_token_in_token_out(engine, EchoEnv(max_turns=3))


def assert_token_in_token_out(engine, env):
    """Two rows x two samples through `engine` (a RecordingEngine): every training id is a sampled id or the
    environment's, the mask says which, and re-rendering the conversation would have given other ids."""
    tok = engine.tokenizer
    rows = env.rows("train", 2)
    rollout = run_trajectories(engine, env, rows, SamplingParams(n=2, max_new_tokens=16, temperature=1.0))

    assert len(rollout.completion_ids) == 4 and len(engine.calls) >= 2
    multi = 0
    for i, traj in enumerate(rollout.trajectories):
        ids, mask = rollout.completion_ids[i], rollout.loss_mask[i]
        # the segments tile the completion; assistant segments are masked 1, environment ones 0
        assert sum((seg for _, seg, _ in traj["segments"]), []) == ids
        assert mask == sum(([m] * len(seg) for _, seg, m in traj["segments"]), [])
        assert [role for role, _, _ in traj["segments"]][::2] == ["assistant"] * traj["turns"]
        # token in: turn k was asked on exactly prompt + everything before it; token out: its ids are kept as sampled
        # (two samples of one row share their first prompt, so the check is: some call, asked on exactly this
        # prefix, returned exactly these ids)
        position = 0
        for k, (role, seg, m) in enumerate(traj["segments"]):
            if role == "assistant":
                asked_here = [c for call in engine.calls for p, c in zip(*call) if p == rollout.prompt_ids[i] + ids[:position]]
                assert seg in asked_here and m == 1
            else:  # the environment's tokens: its reply rendered alone and tokenised alone, nothing else
                reply = {"role": "tool", "content": f"seen {(k + 1) // 2}"}
                text = observation_text(tok, [reply], None, ended_with_eos=ids[position - 1] == tok.eos_token_id)
                assert seg == tok(text, add_special_tokens=False)["input_ids"] and m == 0
                assert tok.decode(seg).startswith("\n<|im_start|>user\n<tool_response>\nseen")
            position += len(seg)
        assert torch.equal(rollout.logprobs[i][torch.tensor(mask) == 0], torch.zeros(mask.count(0)))
        if traj["turns"] >= 2:
            multi += 1
            # what re-rendering the finished conversation would train on differs (the template drops <think>)
            rerendered = tok(tok.apply_chat_template(traj["messages"], tokenize=False),
                             add_special_tokens=False)["input_ids"]
            assert rerendered != rollout.prompt_ids[i] + ids
    assert multi > 0, "no trajectory reached a second turn: the test would not see re-tokenisation drift"
    metrics = trajectory_metrics(rollout.trajectories)
    assert metrics["turns/mean"] == sum(t["turns"] for t in rollout.trajectories) / 4
    assert metrics["end/max_turns"] + metrics["end/truncated"] + metrics["end/done"] + metrics["end/token_budget"] == 1
    return rollout


def test_losses_see_only_sampled_tokens(tiny_lm_sft, think_dropping):
    """pack(loss_masks=...) keeps the environment's tokens out of completion_mask, so GRPO's loss has no
    gradient through their logprobs, and the token count the losses normalise by is the sampled tokens'."""
    torch.manual_seed(1)
    tok, env = think_dropping, EchoEnv(max_turns=2)
    model = tiny_lm_sft.model()
    rollout = run_trajectories(HFEngine(model, tok), env, env.rows("train", 2), SamplingParams(n=2, max_new_tokens=16))
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id, rollout.loss_mask)
    unmasked = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id)
    assert batch.completion_mask.sum() == sum(sum(m) for m in rollout.loss_mask) < unmasked.completion_mask.sum()
    logprobs = token_logprobs(model, unmasked)[0].detach().requires_grad_(True)  # every completion column
    loss, _ = grpo_loss(logprobs, logprobs.detach(), torch.tensor([1.0, -1.0, 0.5, -0.5]), batch.completion_mask,
                        aggregation="token_mean", max_tokens=16, num_sequences=4,
                        num_tokens=batch.completion_mask.sum())
    loss.backward()
    env_columns = unmasked.completion_mask.bool() & ~batch.completion_mask.bool()
    assert env_columns.any() and torch.all(logprobs.grad[env_columns] == 0)
    assert torch.all(logprobs.grad[batch.completion_mask.bool()] != 0)


def test_limits_end_trajectories_with_their_status(tiny_lm_sft, think_dropping):
    tok = think_dropping
    engine = HFEngine(tiny_lm_sft.model(), tok)
    torch.manual_seed(0)
    env = EchoEnv(max_turns=2, max_total_tokens=30)
    rollout = run_trajectories(engine, env, env.rows("train", 2), SamplingParams(n=2, max_new_tokens=16))
    for i, t in enumerate(rollout.trajectories):
        assert len(rollout.prompt_ids[i]) + len(rollout.completion_ids[i]) <= 30
        assert t["end"] in ("token_budget", "max_turns", "truncated")
        assert rollout.truncated[i] == (t["end"] in ("token_budget", "truncated"))
    assert any(t["end"] == "token_budget" for t in rollout.trajectories)
    long = EchoEnv(max_turns=1)
    rollout = run_trajectories(engine, long, long.rows("train", 1), SamplingParams(n=2, max_new_tokens=16))
    assert all(t["turns"] == 1 and t["end"] in ("max_turns", "truncated") for t in rollout.trajectories)
    assert EchoEnv(max_tool_output_chars=16).truncate_output("x" * 20) == ("x" * 16 + "\n[output truncated: 4 more characters]", True)


def test_bad_limits_name_the_field():
    from rlvr.errors import ConfigError

    with pytest.raises(ConfigError, match="'max_turns'"):
        EchoEnv(max_turns=0)
    with pytest.raises(ConfigError, match="'max_total_tokens'"):
        EchoEnv(max_total_tokens=-3)
    with pytest.raises(TypeError, match="score_trajectories"):
        EchoEnv().score(["x"], [{}])


def test_score_trajectories_reads_the_last_assistant_message():
    env = EchoEnv()
    trajectory = [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "<answer>3</answer>"},
                  {"role": "tool", "content": "seen 1"}, {"role": "assistant", "content": "<answer>2</answer>"}]
    [result] = env.score_trajectories([trajectory], [{"answer": "2"}])
    assert result.reward == 1.0


def test_gae_bridges_the_environments_tokens():
    """PPO's GAE over a trajectory whose mask has holes equals GAE over the sampled tokens alone: the
    environment's tokens are not time steps of the policy."""
    from rlvr.trainer.algos.advantages import gae

    torch.manual_seed(0)
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1, 0, 0, 0]], dtype=torch.float32)
    rewards, values = torch.randn(2, 9) * mask, torch.randn(2, 9)
    advantages, returns = gae(rewards, values, mask, gamma=0.9, lam=0.8)
    for row in range(2):
        kept = mask[row].bool()
        a, r = gae(rewards[row, kept][None], values[row, kept][None], torch.ones(1, int(kept.sum())), gamma=0.9, lam=0.8)
        assert torch.allclose(advantages[row, kept], a[0]) and torch.allclose(returns[row, kept], r[0])
        assert torch.all(advantages[row, ~kept] == 0)


def test_a_prompt_past_the_budget_ends_before_any_turn(tiny_lm_sft, think_dropping):
    env = EchoEnv(max_total_tokens=3)
    rollout = run_trajectories(HFEngine(tiny_lm_sft.model(), think_dropping), env, env.rows("train", 1),
                               SamplingParams(n=2, max_new_tokens=16))
    assert rollout.completion_ids == [[], []] and rollout.texts == ["", ""] and rollout.truncated == [True, True]
    assert [t["end"] for t in rollout.trajectories] == ["token_budget"] * 2


def test_the_models_context_bounds_a_trajectory(tiny_lm_sft, think_dropping):
    """tiny models know 128 positions: a trajectory that would outgrow them ends with token_budget inside them."""
    torch.manual_seed(0)
    engine = HFEngine(tiny_lm_sft.model(), think_dropping)
    assert engine.context_length == 128
    env = EchoEnv(max_turns=20)
    rollout = run_trajectories(engine, env, env.rows("train", 2), SamplingParams(n=2, max_new_tokens=16))
    assert all(len(p) + len(c) <= 128 for p, c in zip(rollout.prompt_ids, rollout.completion_ids))
    assert any(t["end"] == "token_budget" for t in rollout.trajectories)
