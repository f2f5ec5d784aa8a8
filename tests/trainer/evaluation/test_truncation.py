"""Completions cut at rollout.max_new_tokens: each environment's own length, no correct-answer reward for a cut
completion by default (arithmetic and countdown keep their scores exactly), and a loud warning when most are cut;
driven through a whole training step and a whole `rlvr eval` with a stand-in engine that returns cut correct answers."""

import json
import sys

import pytest

from rlvr.trainer.env_config import build_env
from rlvr.trainer.experience.rewards import no_credit_when_truncated
from rlvr.verifiers.result import Status, VerifyResult

DEFAULTS = {"arithmetic": (16, "keep"), "countdown": (16, "keep"), "gsm8k": (512, "zero"), "math": (1024, "zero"),
            "humaneval": (512, "zero"), "code_stdio": (1024, "zero"), "reasoning_gym": (256, "zero")}


@pytest.mark.parametrize("env", sorted(DEFAULTS))
def test_each_environment_has_its_own_default_length(compose_train, env):
    cfg = compose_train([f"env={env}"])
    assert (cfg.rollout.max_new_tokens, cfg.rollout.truncated_reward) == DEFAULTS[env]


def test_the_command_line_wins_over_the_environment(compose_train):
    cfg = compose_train(["env=gsm8k", "rollout.max_new_tokens=64", "rollout.truncated_reward=keep"])
    assert (cfg.rollout.max_new_tokens, cfg.rollout.truncated_reward) == (64, "keep")


def test_a_cut_off_gsm8k_solution_earns_nothing(compose_train, env_data, tmp_path):
    """A cut-off solution: `<think>He buys 86*6 = <<9*6=67` scored 1.0 because gsm8k grades the last number."""
    cfg = compose_train(["env=gsm8k", *env_data.data_overrides("gsm8k", tmp_path)])
    env = build_env(cfg.env)
    row = next(r for r in env.rows("test", 4, seed=0) if r["answer"] == "7")
    cut, finished = "<think>He has 3 + 4 = <<3+4=7", "<think>3 + 4 = 7</think><answer>7</answer>"
    scored = env.score([cut, finished], [row, row])
    assert scored[0].reward == 1.0, "the last-number rule alone would pay the cut completion"
    results = no_credit_when_truncated(scored, [True, False], cfg.rollout.truncated_reward)
    assert (results[0].reward, results[0].status) == (0.0, Status.INCORRECT)
    assert results[0].details["truncated"] and results[0].details["reward_before_truncation"] == 1.0
    assert results[1] == scored[1]


def test_keep_returns_the_scores_untouched_and_negative_rewards_stay():
    scored = [VerifyResult(1.0, Status.CORRECT), VerifyResult(-0.5, Status.INCORRECT)]
    assert no_credit_when_truncated(scored, [True, True], "keep") is scored
    zeroed = no_credit_when_truncated(scored, [True, True], "zero")
    assert [(r.reward, r.status) for r in zeroed] == [(0.0, Status.INCORRECT), (-0.5, Status.INCORRECT)]


def test_arithmetic_keeps_every_score_including_a_complete_answer_at_the_limit(compose_train):
    """arithmetic's rewards are exactly the verifiers': keep returns the very list, so no reward changes and
    nothing is drawn from an RNG. A truncated completion that scores is one whose whole answer ends at the limit."""
    cfg = compose_train([])
    env = build_env(cfg.env)
    row = env.rows("train", 1, seed=0)[0]
    texts = [f"<think></think><answer>{row['answer']}</answer>", f"<think></think><answer>{row['answer']}"]
    scored = env.score(texts, [row, row])
    assert [r.reward for r in scored] == [1.0, 0.0]  # the format gate already gives the cut-off answer nothing
    assert no_credit_when_truncated(scored, [True, True], cfg.rollout.truncated_reward) is scored


def test_env_lengths_of_rlvr_eval_are_per_environment(tmp_path):
    from rlvr.envs.arithmetic import ArithmeticEnv
    from rlvr.envs.humaneval import HumanEvalEnv
    from rlvr.trainer.evaluation.eval_config import compose_eval_config
    from rlvr.trainer.evaluation.eval_run import env_lengths

    cfg = compose_eval_config(["envs=[arithmetic,humaneval]"])
    assert env_lengths(cfg, {"arithmetic": ArithmeticEnv, "humaneval": HumanEvalEnv}) == {
        "arithmetic": (16, "keep"), "humaneval": (512, "zero")}
    cfg = compose_eval_config(["envs=[arithmetic,humaneval]", "rollout.max_new_tokens=32"])
    assert env_lengths(cfg, {"arithmetic": ArithmeticEnv, "humaneval": HumanEvalEnv}) == {
        "arithmetic": (32, "keep"), "humaneval": (32, "zero")}


def test_a_run_whose_completions_are_mostly_cut_warns_loudly(tiny_lm, tmp_path, monkeypatch, capsys):
    from rlvr.cli import main

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    main(["train", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1", "rollout.max_new_tokens=4",
          "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=4", "train.steps=2",
          "output_dir=run", "threads=1"])  # the random tiny model never ends a completion in 4 tokens
    captured = capsys.readouterr()
    err = captured.err
    assert "WARNING: 100% of step 1's completions hit rollout.max_new_tokens=4" in err, err
    assert "step 2's" not in err, "warned once, then at most once per train.eval_every steps"
    assert "WARNING: 100% of the held-out eval's completions" in captured.out  # the run's log


def test_context_warning_names_the_context_and_the_fix():
    from rlvr.trainer.truncation import context_warning

    assert context_warning([30, 40], 16, 256) is None  # arithmetic on the tiny model: everything fits
    assert context_warning([30, 40], 16, None) is None  # a config without max_position_embeddings
    line = context_warning([60, 100, 200], 512, 256)
    assert line.startswith("WARNING: ") and "256 positions" in line and "leaves 56 of rollout.max_new_tokens=512" in line
    assert "100% of these prompts" in line and "model.arch.max_positions" in line
    assert "no room" in context_warning([300], 16, 256)
    assert "50% of these prompts" in context_warning([10, 250], 16, 256)


def test_train_and_eval_say_when_the_model_context_cuts_completions(tiny_lm, tmp_path, monkeypatch, capsys):
    """The fixture model has 128 positions: 120 new tokens after a ~30-token prompt cannot fit, and both commands
    say so at start, naming the context and the knob (trainer/rollout/hf.py stops generation there)."""
    from rlvr.cli import main

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    main(["train", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1", "rollout.max_new_tokens=120",
          "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=2", "train.steps=1",
          "output_dir=run", "threads=1"])
    out = capsys.readouterr().out
    assert "WARNING: the model's context is 128 positions" in out and "rollout.max_new_tokens=120" in out, out
    main(["eval", "model.name_or_path=run/checkpoints/step_1", "env=arithmetic", "env.digits=1", "n_prompts=2",
          "temperature=0", "rollout.max_new_tokens=120", "output_dir=scored"])
    out = capsys.readouterr().out
    assert "on arithmetic: WARNING: the model's context is 128 positions" in out, out
    completions = [json.loads(line) for line in (tmp_path / "scored" / "completions.jsonl").read_text().splitlines()]
    longest = max(r["response_tokens"] for r in completions)
    assert longest < 120, "stopped at the context (128 positions less the prompt), not at max_new_tokens"
    assert all(r["truncated"] for r in completions if r["response_tokens"] == longest)  # cut there, not finished


class AnswersEveryPrompt:
    """A stand-in engine: every sample of a prompt `a+b=` (or -, *) is the correct, well-formed answer, and samples
    whose index is in `cut` are reported as cut at max_new_tokens, the case where only the truncation rule (not the
    format gate) decides the reward: a whole answer that ends at the limit."""

    def __init__(self, tokenizer, cut: set[int]):
        self.tokenizer, self.cut = tokenizer, cut

    def generate(self, prompts, params):
        import re

        import torch

        from rlvr.trainer.rollout.types import Rollout

        texts, truncated = [], []
        for prompt in prompts:
            a, op, b = re.search(r"(\d+)([-+*])(\d+)=", prompt).groups()
            answer = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
            for j in range(params.n):
                texts.append(f"<think></think><answer>{answer}</answer>")
                truncated.append(j in self.cut)
        encode = getattr(self.tokenizer, "encode", None)
        ids = [encode(t, add_special_tokens=False) if encode else [0, 1] for t in texts]
        prompt_ids = [encode(p, add_special_tokens=False) if encode else [0] for p in prompts for _ in range(params.n)]
        return Rollout(prompt_ids, ids, texts, [torch.zeros(len(i)) for i in ids], truncated)

    def sync_weights(self, model):
        pass

    def shutdown(self):
        pass


@pytest.mark.parametrize("mode,expected", [("zero", [1.0, 0.0, 1.0, 0.0]), ("keep", [1.0, 1.0, 1.0, 1.0])])
def test_a_training_step_pays_nothing_for_a_cut_correct_answer(tiny_lm_sft, compose_train, mode, expected):
    """Driven through a whole GRPO step: samples 1 and 3 of each prompt are correct but cut at max_new_tokens;
    with truncated_reward=zero the step's rewards (and its mean) give them nothing, with keep full credit."""
    from rlvr.trainer.algos.table import ALGORITHMS
    from rlvr.trainer.step import train_step
    from tests.trainer.algos.test_algorithm_steps import _context
    from tests.trainer.test_trainer_step import STEP_OVERRIDES

    cfg = compose_train(STEP_OVERRIDES + ["algo=grpo", f"rollout.truncated_reward={mode}"])
    ctx = _context(cfg, tiny_lm_sft)
    ctx.env = build_env(cfg.env)  # the real arithmetic env (the context's stand-in alternates its rewards)
    ctx.engine = AnswersEveryPrompt(tiny_lm_sft.tokenizer, cut={1, 3})
    metrics, samples = train_step(ctx, 1, ALGORITHMS["grpo"])
    assert metrics["reward/mean"] == pytest.approx(sum(expected) / 4), metrics
    assert len(samples) == 2
    for sample in samples:
        assert [c["reward"] for c in sample["completions"]] == pytest.approx(expected), sample


class _PlainTokenizer:
    chat_template = "plain"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[-1]["content"]


@pytest.mark.parametrize("mode,pass_at_1", [("zero", 0.5), ("keep", 1.0)])
def test_rlvr_eval_pays_nothing_for_a_cut_correct_answer(tmp_path, mode, pass_at_1):
    """`rlvr eval` end to end with a stand-in engine: of each prompt's 2 correct samples the second is cut at
    max_new_tokens; truncated_reward=zero reads reward 0 for it (pass@1 0.5), keep reads 1 (pass@1 1.0)."""
    from rlvr.trainer.evaluation.eval_config import compose_eval_config
    from rlvr.trainer.evaluation.eval_run import run_eval

    engine = AnswersEveryPrompt(_PlainTokenizer(), cut={1})
    out = tmp_path / "eval"
    cfg = compose_eval_config([f"models=[{tmp_path / 'policy'}]", "env=arithmetic", "n_prompts=3", "n_samples=2",
                               "temperature=1.0", f"rollout.truncated_reward={mode}", f"output_dir={out}"])
    results = run_eval(cfg, log=lambda *_: None, engine_factory=lambda model: engine)
    assert results["results"][0]["pass@1"] == pytest.approx(pass_at_1), results["results"][0]
    records = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert len(records) == 6
    for record in records:
        assert record["truncated"] == (record["sample"] == 1)
        assert record["reward"] == (0.0 if record["truncated"] and mode == "zero" else 1.0), record
