"""`train.max_tokens_per_micro_batch`: micro-batches by a token budget (trainer/algos/token_budget.py), rows
sorted by length and each micro-batch trimmed to its longest row, give the same loss and gradient as
fixed-size micro-batches for every algorithm family on the shared update (fp32, tight tolerance)."""

import pytest
import torch

from rlvr.trainer.algos.token_budget import token_budget_micro_batches
from rlvr.trainer.models.logprobs import pack
from tests.step_grads import assert_same_step, step_gradients


@pytest.mark.parametrize("budget", [1, 10, 23, 40, 1000])
def test_plan_partitions_the_rows_within_the_budget(budget):
    lengths = torch.tensor([7, 3, 12, 5, 5, 9, 1, 12])
    plan = token_budget_micro_batches(lengths, budget)
    assert sorted(torch.cat(plan).tolist()) == list(range(len(lengths))), "every row exactly once"
    for rows in plan:
        cost = len(rows) * int(lengths[rows].max())
        assert cost <= budget or len(rows) == 1, (rows, cost)
    order = torch.cat(plan)
    assert (lengths[order][:-1] >= lengths[order][1:]).all(), "longest rows first"
    if budget == 1000:
        assert len(plan) == 1
    if budget == 23:  # 12+12 = 24 > 23: the two longest rows go alone, then 9+7 = 2 x 9 = 18, ...
        assert [r.tolist() for r in plan[:2]] == [[2], [7]]


def test_plan_refuses_a_budget_below_one():
    with pytest.raises(ValueError, match="max_tokens=0"):
        token_budget_micro_batches(torch.tensor([1, 2]), 0)


def test_trimmed_select_keeps_the_shape_and_marks_the_width():
    batch = pack([[5, 6], [7, 8, 9]], [[10], [11, 12, 13, 14]], pad_id=0)  # lengths 3 and 7, L = 7
    short = batch.select(torch.tensor([0]), trim=True)
    assert short.input_ids.shape == (1, 7) and short.width == 3
    assert batch.select(torch.tensor([0, 1]), trim=True).width == 7
    assert batch.select(torch.tensor([0])).width is None


BUDGETED = ["train.micro_batch_size=8", "train.max_tokens_per_micro_batch=64"]


@pytest.mark.parametrize("overrides", [
    ["algo=grpo"], ["algo=gspo", "algo.mu=2"], ["algo=dapo"], ["algo=grpo", "algo.beta=0.04"],
    ["algo=reinforce"], ["algo=ppo"], ["algo=ppo", "algo.critic=model"], ["algo=dpo"],
], ids=lambda o: "-".join(x.split("=")[1] for x in o))
def test_a_step_with_a_token_budget_equals_fixed_micro_batches(tiny_lm_sft, compose_train, overrides):
    fixed = step_gradients(compose_train, tiny_lm_sft, overrides)  # micro_batch_size=4 (STEP_OVERRIDES)
    budgeted = step_gradients(compose_train, tiny_lm_sft, overrides + BUDGETED)
    assert_same_step(fixed, budgeted, ("loss",) if overrides == ["algo=dpo"] else ("loss", "entropy"))


@pytest.mark.parametrize("overrides,match", [
    (["train.max_tokens_per_micro_batch=-5"], "train.max_tokens_per_micro_batch=-5 must be >= 0"),
    (["algo=npg", "train.max_tokens_per_micro_batch=64"], "train.max_tokens_per_micro_batch=64: algo=npg"),
])
def test_bad_budgets_are_refused(compose_train, overrides, match):
    from rlvr.errors import ConfigError
    from rlvr.trainer.validate import validate_train_config

    with pytest.raises(ConfigError, match=match):
        validate_train_config(compose_train(overrides))


def test_a_budgeted_step_runs_the_planned_micro_batches(tiny_lm_sft, compose_train):
    """The budget engaged: 8 rows of ~20 tokens under a 48-token budget run as several trimmed forward passes,
    each within the budget, where micro_batch_size=8 alone runs one. (The equality tests above pass even when the
    budget is ignored; this one does not.)"""
    from tests.forward_spy import grad_forwards

    model_class = type(tiny_lm_sft.model())
    with grad_forwards(model_class) as plain:
        step_gradients(compose_train, tiny_lm_sft, ["algo=grpo", "train.micro_batch_size=8"])
    with grad_forwards(model_class) as budgeted:
        step_gradients(compose_train, tiny_lm_sft, ["algo=grpo", "train.micro_batch_size=8",
                                                    "train.max_tokens_per_micro_batch=48"])
    assert [rows for rows, _ in plain] == [8], plain
    assert len(budgeted) >= 3 and sum(rows for rows, _ in budgeted) == 8, budgeted
    for rows, width in budgeted:
        assert rows * width <= 48 or rows == 1, budgeted
