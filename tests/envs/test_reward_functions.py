"""rlvr's rewards inside other trainers (integrations/reward_functions.py): TRL's reward-function call and verl's
`compute_score` give the verdicts `rlvr verify` gives on the same records, and a real two-step TRL
`GRPOTrainer` run logs the rewards `rlvr verify` computes for the completions it sampled.

verl itself is not installed: verl 0.9.1 (PyPI, 2026-12-02) requires transformers<5.11 and ray, and this
project runs transformers 5.19 (`pip install --dry-run verl` would downgrade it); its signatures are called here as its reward managers call them (verl/workers/reward_manager:
naive passes data_source=, solution_str=, ground_truth=, extra_info= per sample; batch passes the plural
names as lists).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.errors import ConfigError
from rlvr.integrations.reward_functions import RewardFunction, compute_score, compute_score_batch

ADD_TESTS = {"kind": "call", "fn": "add", "cases": [{"args": [1, 2], "expected": 3}, {"args": [5, -5], "expected": 0}]}
CODE = {
    "right": "```python\ndef add(a, b):\n    return a + b\n```",
    "wrong": "```python\ndef add(a, b):\n    return a - b\n```",
    "exit_early": "```python\nimport os\nos._exit(0)\n```",
    "prose": "I would add them.",
}
MATH = [("<answer>\\frac{1}{2}</answer>", "0.5"), ("<answer>3</answer>", "4"), ("no answer here", "7"),
        ("\\boxed{x^2+2x+1}", "(x+1)^2")]


def rlvr_verify(records: list[dict], tmp_path: Path, verifier: str | None = None) -> list[dict]:
    """`rlvr verify` on `records` (the command a user runs), as a subprocess."""
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = [sys.executable, "-m", "rlvr", "verify", f"input={src}", f"output={out}"]
    if verifier:
        args.append(f"verifier={verifier}")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_math_reward_as_trl_calls_it_equals_rlvr_verify(tmp_path):
    completions = [c for c, _ in MATH]
    answers = [a for _, a in MATH]
    logged = {}
    with RewardFunction("math") as reward:
        rewards = reward(prompts=["q"] * len(MATH), completions=completions, completion_ids=[[1]] * len(MATH),
                         answer=answers, trainer_state=None, log_metric=logged.__setitem__,
                         log_extra=lambda *a: None)
    expected = rlvr_verify([{"id": str(i), "completion": c, "answer": a} for i, (c, a) in enumerate(MATH)],
                           tmp_path, verifier="math")
    assert rewards == [e["reward"] for e in expected] == [1.0, 0.0, 0.0, 1.0]
    assert [r.status.value for r in reward.last_results] == [e["status"] for e in expected]
    # statuses as TRL's log_metric gets them: 2 correct, 1 incorrect, 1 unparsable of 4
    assert {k: v for k, v in logged.items() if v} == {"rlvr_math/correct_frac": 0.5, "rlvr_math/incorrect_frac": 0.25,
                                                      "rlvr_math/unparsable_frac": 0.25}
    assert {"rlvr_math/timeout_frac", "rlvr_math/error_frac", "rlvr_math/hack_rate"} <= set(logged)
    assert reward.__name__ == "rlvr_math"


def test_conversational_completions_and_bad_columns():
    with RewardFunction("math") as reward:
        chat = [[{"role": "assistant", "content": "<answer>2</answer>"}]]
        assert reward(prompts=[[{"role": "user", "content": "1+1"}]], completions=chat, answer=["2"]) == [1.0]
        with pytest.raises(ValueError, match="column 'answer' must hold one value per completion"):
            reward(completions=["<answer>2</answer>", "x"], answer=["2"])
        with pytest.raises(ValueError, match="completion 0: expected a string or a list of chat messages"):
            reward(completions=[42], answer=["2"])
    with pytest.raises(ConfigError, match="pass env=NAME"):
        RewardFunction("math", digits=3)
    with pytest.raises(ConfigError, match="multi-turn"):
        RewardFunction(env="guess_number")


def test_a_column_the_verifier_needs_is_named_never_a_silent_zero():
    """TRL's examples name the reference `solution`: the reward used to be 0.0 with nothing said."""
    with RewardFunction("math") as reward:
        with pytest.raises(ValueError, match=r"reads the record field 'answer', which is not among the dataset's "
                                             r"columns \['solution'\].*columns=\{'COLUMN': 'answer'\}"):
            reward(completions=["<answer>2</answer>"], solution=["2"])
    with RewardFunction("math", columns={"solution": "answer"}) as reward:
        assert reward(completions=["<answer>2</answer>", "<answer>3</answer>"], solution=["2", "2"]) == [1.0, 0.0]
    with RewardFunction([{"verifier": "code"}]) as reward, pytest.raises(ValueError, match="'tests'"):
        reward(completions=["x"], answer=["2"])
    with pytest.raises(ConfigError, match="columns must map"):
        RewardFunction("math", columns=["solution"])


def test_env_reward_is_the_environments_composite():
    from rlvr.envs import load_env

    env = load_env("arithmetic")
    rows = env.rows("test", 4, seed=0)
    completions = [rows[0]["reference"], "<think></think><answer>-1</answer>", "nothing", rows[3]["reference"]]
    with RewardFunction(env="arithmetic") as reward:
        got = reward(completions=completions, **{k: [r[k] for r in rows] for k in ("answer", "id")})
    assert got == [r.reward for r in env.score(completions, rows)]
    assert got[0] == got[3] == 1.0 and got[2] == 0.0


sandbox = pytest.mark.xdist_group("sandbox")


@sandbox
def test_code_reward_and_verl_compute_score_equal_rlvr_verify(tmp_path):
    names = list(CODE)
    completions = [CODE[n] for n in names]
    with RewardFunction("code") as reward:
        # `tests` once as a dict and once as the JSON string a Hugging Face dataset column often holds
        trl_rewards = reward(completions=completions, tests=[ADD_TESTS, json.dumps(ADD_TESTS)] * 2)
    records = [{"id": n, "verifier": "code", "completion": c, "tests": ADD_TESTS} for n, c in zip(names, completions)]
    expected = rlvr_verify(records, tmp_path)
    assert trl_rewards == [e["reward"] for e in expected]
    assert dict(zip(names, trl_rewards)) == {"right": 1.0, "wrong": 0.0, "exit_early": 0.0, "prose": 0.0}

    # verl: a mixed batch, math and code, through both of its reward managers' signatures
    sources = ["openai/gsm8k", "code", "code", "math_dapo"]
    solutions = ["<answer>12</answer>", CODE["right"], CODE["exit_early"], "\\boxed{13}"]
    truths = ["12", json.dumps(ADD_TESTS), ADD_TESTS, "14"]
    batch = compute_score_batch(data_sources=sources, solution_strs=solutions, ground_truths=truths,
                                extra_infos=[None, None, {"index": 3}, {"verifier": "math"}])
    single = [compute_score(data_source=s, solution_str=x, ground_truth=t, extra_info=None)
              for s, x, t in zip(sources, solutions, truths)]
    assert batch == single == [{"score": 1.0, "acc": 1.0}, {"score": 1.0, "acc": 1.0}, {"score": 0.0, "acc": 0.0},
                               {"score": 0.0, "acc": 0.0}]
    with pytest.raises(ValueError, match="2 data_sources, 1 solution_strs"):
        compute_score_batch(["math", "math"], ["x"], ["1", "2"])


@pytest.mark.slow
@sandbox
def test_trl_grpo_trainer_logs_the_rewards_rlvr_verify_gives(tiny_lm_sft, tmp_path):
    """Two real GRPOTrainer steps on the tiny model with rlvr's math and code rewards: the per-step means TRL
    logged equal `rlvr verify`'s rewards of the completions TRL sampled (captured as TRL passed them)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.envs import load_env
    from rlvr.trainer.rollout.prompts import render_prompts

    env = load_env("arithmetic")
    rows = env.rows("train", 8, seed=0)
    tok = tiny_lm_sft.tokenizer
    dataset = Dataset.from_dict({"prompt": render_prompts(tok, env, rows), "answer": [r["answer"] for r in rows],
                                 "tests": [json.dumps(ADD_TESTS)] * len(rows)})
    seen = {"math": [], "code": []}

    def captured(name, reward):
        def call(completions, **columns):  # what TRL passed, kept to re-score with `rlvr verify`
            seen[name].append((list(completions), list(columns["answer"]), list(columns["tests"])))
            return reward(completions=completions, **columns)
        call.__name__ = reward.__name__
        return call

    config = GRPOConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, bf16=False, seed=0, report_to="none",
                        save_strategy="no", logging_steps=1, disable_tqdm=True, max_steps=2, shuffle_dataset=False,
                        per_device_train_batch_size=8, num_generations=4, max_completion_length=16,
                        temperature=1.0, beta=0.0, learning_rate=1e-4, gradient_checkpointing=False)
    with RewardFunction("math") as math_reward, RewardFunction("code") as code_reward:
        trainer = GRPOTrainer(model=str(tiny_lm_sft.path), reward_funcs=[captured("math", math_reward),
                                                                         captured("code", code_reward)],
                              args=config, train_dataset=dataset, processing_class=tok)
        trainer.train()
    logged = [h for h in trainer.state.log_history if "rewards/rlvr_math/mean" in h]
    assert len(logged) == 2 == len(seen["math"]) == len(seen["code"])
    for step, entry in enumerate(logged):
        completions, answers, tests = seen["math"][step]
        math = rlvr_verify([{"id": str(i), "verifier": "math", "completion": c, "answer": a}
                            for i, (c, a) in enumerate(zip(completions, answers))], tmp_path)
        code = rlvr_verify([{"id": str(i), "verifier": "code", "completion": c, "tests": json.loads(t)}
                            for i, (c, t) in enumerate(zip(completions, tests))], tmp_path)
        assert entry["rewards/rlvr_math/mean"] == pytest.approx(sum(r["reward"] for r in math) / len(math))
        assert entry["rewards/rlvr_code/mean"] == pytest.approx(sum(r["reward"] for r in code) / len(code))
        # log_metric reached TRL's logs, per reward function
        assert entry["rlvr_code/hack_rate"] == 0.0 and 0.0 <= entry["rlvr_math/correct_frac"] <= 1.0
