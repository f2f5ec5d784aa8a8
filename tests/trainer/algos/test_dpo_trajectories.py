"""DPO on multi-turn trajectories (trainer/algos/dpo.py): each side's logprob is summed over its sampled tokens
only, for the policy and the reference, so the environment's tokens never move the loss; and one online DPO
step on a guess_number env pairs trajectories and trains."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from rlvr.trainer.algos.dpo import PairBatch, pack_pairs, pair_batch_loss, sequence_logprobs
from rlvr.trainer.algos.pairs import Pair

V, PAD = 11, 0
PROMPT = [1, 2, 3]
# chosen: 1 sampled, 3 written by the environment, 2 sampled; rejected: 1 sampled, 3 environment, 1 sampled
CHOSEN, CHOSEN_MASK = [4, 9, 10, 2, 6, 7], [1, 0, 0, 0, 1, 1]
REJECTED, REJECTED_MASK = [8, 3, 9, 5, 10], [1, 0, 0, 0, 1]  # other environment tokens than chosen's,
# so a loss that counted them would not cancel them out of the margin


class PositionLogits(torch.nn.Module):
    """A 'model' whose logits at position t are row t of a table, whatever the ids: each predicted token's
    logprob is then a known entry, and one position can be changed alone."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table.clone())

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=self.table[: input_ids.shape[1]].expand(input_ids.shape[0], -1, -1))


def by_hand(table: torch.Tensor, completion: list[int], mask: list[int]) -> float:
    """sum over sampled tokens of log softmax(table[t])[token], t the position that predicts it."""
    logp = F.log_softmax(table.double(), -1)
    first = len(PROMPT) - 1
    return sum(logp[first + k, tok].item() for k, (tok, m) in enumerate(zip(completion, mask)) if m)


def loss_of(policy: torch.Tensor, reference: torch.Tensor, beta: float = 0.5) -> float:
    sequences = pack_pairs([Pair(0, 0, 1, 1.0)], lambda g: PROMPT, lambda g, i: [CHOSEN, REJECTED][i], PAD,
                           lambda g, i: [CHOSEN_MASK, REJECTED_MASK][i])
    batch = PairBatch(sequences, sequence_logprobs(PositionLogits(reference), sequences, micro_batch_size=2))
    algo = SimpleNamespace(beta=beta, loss_type="sigmoid", label_smoothing=0.0)
    loss, _ = pair_batch_loss(PositionLogits(policy), batch, algo, num_pairs=1)
    return loss.item()


def test_the_loss_is_dpo_over_the_sampled_tokens_only():
    generator = torch.Generator().manual_seed(0)
    policy, reference = torch.randn(12, V, generator=generator), torch.randn(12, V, generator=generator)
    beta = 0.5
    margin = ((by_hand(policy, CHOSEN, CHOSEN_MASK) - by_hand(reference, CHOSEN, CHOSEN_MASK))
              - (by_hand(policy, REJECTED, REJECTED_MASK) - by_hand(reference, REJECTED, REJECTED_MASK)))
    expected = -F.logsigmoid(torch.tensor(beta * margin, dtype=torch.float64)).item()
    assert loss_of(policy, reference, beta) == pytest.approx(expected, rel=1e-5)

    # the positions predicting the environment's tokens (both sides' 2nd to 4th completion tokens):
    # changing them, in the policy or the reference, leaves the loss as it was
    env_positions = [len(PROMPT) - 1 + k for k in (1, 2, 3)]
    for table in (policy, reference):
        changed = table.clone()
        changed[env_positions] += 5 * torch.randn(len(env_positions), V, generator=generator)
        args = (changed, reference) if table is policy else (policy, changed)
        assert loss_of(*args, beta) == pytest.approx(expected, rel=1e-5)
    # ... while a sampled token's position does change it (the check above could not pass by accident)
    changed = policy.clone()
    changed[len(PROMPT) - 1] += 5 * torch.randn(V, generator=generator)
    assert loss_of(changed, reference, beta) != pytest.approx(expected, rel=1e-3)


def test_one_dpo_step_on_guess_number_trains_on_pairs_of_trajectories(tiny_lm_sft, compose_train):
    """Online DPO on a guess_number env (ArithmeticPromptGuess: a prompt the tiny model answers, so rewards differ
    within a group and pairs exist): pairs of trajectories, environment replies in them, every parameter moves."""
    from rlvr.trainer.algos.table import ALGORITHMS
    from rlvr.trainer.step import train_step
    from rlvr.trainer.validate import validate_multi_turn
    from tests.trainer.algos.test_algorithm_steps import _context
    from tests.trainer.experience.test_multi_turn_envs import ArithmeticPromptGuess
    from tests.trainer.test_trainer_step import STEP_OVERRIDES

    cfg = compose_train(STEP_OVERRIDES + ["algo=dpo"])
    ctx = _context(cfg, tiny_lm_sft)
    ctx.env, ctx.reference = ArithmeticPromptGuess(high=9, max_turns=3), tiny_lm_sft.model().eval()
    validate_multi_turn(cfg, ctx.env)  # online DPO on trajectories is no longer refused
    before = {name: p.detach().clone() for name, p in ctx.model.named_parameters()}
    torch.manual_seed(0)
    metrics, samples = train_step(ctx, 1, ALGORITHMS["dpo"])
    assert metrics["pairs/count"] > 0 and metrics["turns/mean"] > 1, metrics
    assert "loss" in metrics or any(k.startswith("rewards/") for k in metrics), metrics
    assert all(not torch.equal(p.detach(), before[n]) for n, p in ctx.model.named_parameters())
    json.dumps(samples)
