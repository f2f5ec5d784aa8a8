"""`env.prompt=base|instruct` (envs/base.py PromptStyle): the prompt each built-in environment gives a model, the
reward that fits its answer format, and the lengths that follow it; `model.kind` chooses it (model=smollm2: instruct)."""

import pytest

from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.trainer.validate import validate_train_config
from rlvr.verifiers.format import format_problem


def _row(env, split="test"):
    return env.rows(split, 1, seed=0)[0]


def test_arithmetic_base_prompt_is_the_tiny_models():
    env = load_env("arithmetic", prompt="base")
    row = _row(env)
    assert row["messages"][0]["content"] == f"{row['a']}+{row['b']}="
    assert env.default_max_new_tokens == 16 and env.truncated_reward == "keep"
    # the R1 format gate: 0.9 exact (gated on the format) + 0.1 format
    assert env.score([f"<think></think><answer>{row['answer']}</answer>"], [row])[0].reward == pytest.approx(1.0)
    assert env.score([row["answer"]], [row])[0].reward == 0.0


def test_arithmetic_instruct_prompt_states_the_format_and_scores_the_answer():
    env = load_env("arithmetic", prompt="instruct")
    row = {"id": "x", "messages": [], "answer": "47", "a": 12, "b": 35, "op": "+"}
    assert _row(env)["messages"][0]["content"].startswith("What is ")
    assert "<answer></answer>" in _row(env)["messages"][0]["content"]
    assert env.default_max_new_tokens == 48 and env.truncated_reward == "zero"
    scored = [r.reward for r in env.score(["<answer>47</answer>",  # 0.9 answer + 0.1 format
                                           "12 + 35 = 47",  # the last number: 0.9, no tag: no format reward
                                           "12 + 35 = 47. <answer>47</answer>",  # text before the tag is allowed
                                           "I think 47. <answer>46</answer>",  # the tag wins over the last number
                                           "<answer>47</answer> and more",  # text after the tag: no format reward
                                           "no number at all"], [row] * 6)]
    assert scored == pytest.approx([1.0, 0.9, 1.0, 0.1, 0.9, 0.0])


def test_countdown_instruct_prompt():
    env = load_env("countdown", prompt="instruct")
    row = _row(env)
    assert row["messages"][0]["content"].startswith("Using the numbers ")
    assert env.default_max_new_tokens == 64
    good = f"Let me try. <answer>{row['reference'].split('<answer>')[1].split('</answer>')[0]}</answer>"
    assert env.score([good], [row])[0].reward == pytest.approx(1.0)


def test_an_explicit_template_or_reward_wins_over_the_style():
    env = load_env("arithmetic", prompt="instruct", prompt_template="Q: {a}{op}{b}?", reward=[{"verifier": "format"}])
    assert _row(env)["messages"][0]["content"].startswith("Q: ")
    assert env.verifier_names == ["format"]


def test_an_unknown_style_names_the_key_and_the_choices():
    with pytest.raises(ConfigError, match=r"env\.prompt='chat': arithmetic offers base \| instruct"):
        load_env("arithmetic", prompt="chat")


def test_unanchored_format_allows_text_before_the_answer_only():
    assert format_problem("47 <answer>47</answer>", think=False, anchored=False) is None
    assert format_problem("47 <answer>47</answer>", think=False) == "text before <answer>"
    assert format_problem("<answer>47</answer> ok", think=False, anchored=False) == "text after </answer>"
    assert format_problem("a <answer>1</answer><answer>2</answer>", think=False, anchored=False) \
        == "more than one <answer>"


def test_model_kind_chooses_the_prompt_and_its_lengths(compose_train):
    tiny = compose_train([])
    assert (tiny.model.kind, tiny.env.prompt, tiny.rollout.max_new_tokens, tiny.rollout.truncated_reward) \
        == ("base", "base", 16, "keep")
    smol = compose_train(["model=smollm2"])
    assert (smol.model.kind, smol.env.prompt, smol.rollout.max_new_tokens, smol.rollout.truncated_reward) \
        == ("instruct", "instruct", 48, "zero")
    assert compose_train(["model=smollm2", "env=countdown"]).rollout.max_new_tokens == 64
    assert compose_train(["model=smollm2", "env.prompt=base"]).rollout.max_new_tokens == 16  # the env's key wins
    hf = compose_train(["model=hf", "model.name_or_path=some/model"])
    assert hf.env.prompt == "instruct"
    assert compose_train(["model=hf", "model.name_or_path=a/b", "model.kind=base"]).env.prompt == "base"


def test_model_smollm2_presets_and_command_line_wins(compose_train):
    cfg = compose_train(["model=smollm2"])
    validate_train_config(cfg)
    assert (cfg.model.name_or_path, cfg.optim.lr, cfg.rollout.temperature, cfg.train.steps,
            cfg.train.prompts_per_step, cfg.train.completions_per_prompt) == ("smollm2", 1e-5, 0.7, 40, 4, 8)
    cfg = compose_train(["model=smollm2", "optim.lr=3e-5", "rollout.temperature=1.0", "train.steps=5"])
    assert (cfg.optim.lr, cfg.rollout.temperature, cfg.train.steps) == (3e-5, 1.0, 5)


def test_a_bad_model_kind_is_refused(compose_train):
    cfg = compose_train(["model.kind=chat"])
    with pytest.raises(ConfigError, match="model.kind='chat' must be base or instruct"):
        validate_train_config(cfg)


def test_eval_envs_follow_model_kind():
    from rlvr.trainer.evaluation.eval_config import compose_eval_config
    from rlvr.trainer.evaluation.specs import build_spec_env, env_specs_of

    cfg = compose_eval_config(["model.kind=instruct", "envs=[arithmetic,countdown]"])
    envs = [build_spec_env(spec) for spec in env_specs_of(cfg)]
    assert [env.prompt for env in envs] == ["instruct", "instruct"]
    assert [env.default_max_new_tokens for env in envs] == [48, 64]
    assert build_spec_env(env_specs_of(compose_eval_config([]))[0]).prompt == "base"
    single = compose_eval_config(["model.kind=instruct"])
    assert build_spec_env(env_specs_of(single)[0]).prompt == "instruct"
