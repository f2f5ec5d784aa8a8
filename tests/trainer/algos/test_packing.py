"""`train.pack_sequences=true`: each token-budget micro-batch's rows run as one packed row, positions restarting per
sequence and attention kept within each (trainer/models/packing.py). Packed and padded micro-batches give the same
loss and gradients for every algorithm family (fp32), the packed forward equals each sequence run alone, and
packing is refused where transformers would let a sequence attend to its neighbours."""

import pytest
import torch

from rlvr.errors import ConfigError
from rlvr.trainer.algos.token_budget import token_budget_micro_batches
from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.models.packing import check_packing, pack_row
from tests.step_grads import assert_same_step, step_gradients


def test_pack_row_lays_sequences_end_to_end_with_positions_restarting():
    # rows: prompt [5, 6] + completion [10]; prompt [7] + completion [11, 12]; padded to L = 3
    batch = pack([[5, 6], [7]], [[10], [11, 12]], pad_id=0)
    row = pack_row(batch.input_ids, batch.attention_mask, batch.completion_mask)
    assert row.input_ids.tolist() == [[5, 6, 10, 7, 11, 12]]
    assert row.position_ids.tolist() == [[0, 1, 2, 0, 1, 2]]
    # completion tokens 10 (predicted at row position 1), 11 (at 3, sequence 2 starts at 3) and 12 (at 4)
    assert row.positions.tolist() == [1, 3, 4] and row.targets.tolist() == [10, 11, 12]


def test_pack_row_refuses_left_padding():
    ids = torch.tensor([[0, 5, 6]])
    with pytest.raises(ValueError, match="right-padded"):
        pack_row(ids, torch.tensor([[0, 1, 1]]), torch.tensor([[0.0, 1.0]]))


@pytest.mark.parametrize("budget", [7, 12, 20, 1000])
def test_packed_plan_fills_each_micro_batch_by_summed_length(budget):
    lengths = torch.tensor([7, 3, 12, 5, 5, 9, 1, 12])
    plan = token_budget_micro_batches(lengths, budget, packed=True)
    assert sorted(torch.cat(plan).tolist()) == list(range(len(lengths))), "every row exactly once"
    for rows in plan:
        assert int(lengths[rows].sum()) <= budget or len(rows) == 1, rows
    if budget == 20:  # longest first, each into the first with room: 12+7+1 | 12+5+3 | 9+5; padded: 12 | 12 | 9,7 | 5,5,3,1
        assert [r.tolist() for r in plan] == [[2, 0, 6], [7, 3, 1], [5, 4]]
        assert len(token_budget_micro_batches(lengths, budget)) == 4


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_logprobs_equal_each_sequence_alone(tiny_lm_sft, attention):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_sft.path, attn_implementation=attention, dtype=torch.float32)
    batch = pack([[3, 4, 5], [6], [7, 8]], [[9, 10, 11, 12], [13, 14], [15]], pad_id=0)
    padded, padded_entropy = token_logprobs(model, batch, with_entropy=True)
    rows = torch.arange(3)
    packed, packed_entropy = token_logprobs(model, batch.select(rows, pack=True), with_entropy=True)
    alone = torch.cat([token_logprobs(model, batch.select(torch.tensor([i]), trim=True))[0] for i in range(3)])
    assert (padded != 0).sum() == 7  # the 7 completion tokens, each compared below
    torch.testing.assert_close(packed, alone, rtol=0, atol=1e-5)
    torch.testing.assert_close(packed, padded, rtol=0, atol=1e-5)
    torch.testing.assert_close(packed_entropy, padded_entropy, rtol=0, atol=1e-5)


PACKED = ["train.micro_batch_size=8", "train.max_tokens_per_micro_batch=64", "train.pack_sequences=true"]


@pytest.mark.parametrize("overrides", [
    ["algo=grpo"], ["algo=gspo", "algo.mu=2"], ["algo=dapo"], ["algo=grpo", "algo.beta=0.04"],
    ["algo=reinforce"], ["algo=reinforce", "algo.beta=0.04"], ["algo=ppo"], ["algo=ppo", "algo.critic=model"],
    ["algo=dpo"],
], ids=lambda o: "-".join(x.split("=")[1] for x in o))
def test_a_packed_step_equals_padded_micro_batches(tiny_lm_sft, compose_train, overrides):
    padded = step_gradients(compose_train, tiny_lm_sft, overrides)  # micro_batch_size=4 (STEP_OVERRIDES)
    packed = step_gradients(compose_train, tiny_lm_sft, overrides + PACKED)
    assert_same_step(padded, packed, ("loss",) if overrides == ["algo=dpo"] else ("loss", "entropy"))


def test_a_small_budget_packs_into_several_micro_batches_with_the_same_step(tiny_lm_sft, compose_train):
    # 8 rows of ~20 tokens under a 48-token budget: a few rows per packed row, several micro-batches
    padded = step_gradients(compose_train, tiny_lm_sft, ["algo=grpo"])
    packed = step_gradients(compose_train, tiny_lm_sft, ["algo=grpo", "train.max_tokens_per_micro_batch=48",
                                                         "train.pack_sequences=true"])
    assert_same_step(padded, packed)


def test_the_check_passes_the_tiny_model_and_refuses_an_unknown_attention(tiny_lm_sft):
    model = tiny_lm_sft.model()
    check_packing(model)  # sdpa: transformers builds the block-diagonal mask

    class OtherKernel(torch.nn.Module):  # a stand-in: only its config is read before the refusal
        config = type("Config", (), {"_attn_implementation": "paged_attention", "vocab_size": 8})()

    with pytest.raises(ConfigError, match="train.pack_sequences=true: .*'paged_attention'"):
        check_packing(OtherKernel())


def test_the_check_refuses_a_model_that_attends_across_sequences(tiny_lm_sft):
    """Negative control: the same model with position_ids dropped sees one long sequence (plain causal mask)."""
    inner = tiny_lm_sft.model()

    class Leaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.config = inner, inner.config

        def forward(self, input_ids, position_ids=None, **kwargs):
            return self.inner(input_ids=input_ids, **kwargs)

    with pytest.raises(ConfigError, match="attends across packed sequences"):
        check_packing(Leaky())


@pytest.mark.parametrize("overrides,match", [
    (["train.pack_sequences=true"], "train.pack_sequences=true packs each token-budget micro-batch"),
    (["algo=npg", "train.pack_sequences=true", "train.max_tokens_per_micro_batch=64"],
     "train.max_tokens_per_micro_batch=64: algo=npg"),
])
def test_packing_without_a_token_budget_is_refused(compose_train, overrides, match):
    from rlvr.trainer.validate import validate_train_config

    with pytest.raises(ConfigError, match=match):
        validate_train_config(compose_train(overrides))


def test_a_packed_step_runs_each_micro_batch_as_one_row(tiny_lm_sft, compose_train):
    """Packing engaged: under a 48-token packed budget the 8 completions run as a few single-row forward passes,
    each at most 48 columns, not as 8 padded rows. (The equality tests above pass even when packing is ignored.)"""
    from tests.forward_spy import grad_forwards

    with grad_forwards(type(tiny_lm_sft.model())) as forwards:
        step_gradients(compose_train, tiny_lm_sft, ["algo=grpo", "train.max_tokens_per_micro_batch=48",
                                                    "train.pack_sequences=true"])
    assert 2 <= len(forwards) < 8, forwards
    assert all(rows == 1 and width <= 48 for rows, width in forwards), forwards
