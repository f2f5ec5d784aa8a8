"""algo=sft's loss (trainer/algos/sft_loss.py): derived by hand with the prompt masked, additive over micro-batches,
and equal to TRL's SFTTrainer completion-only loss on the same model and token ids."""

import math
import tempfile

import pytest
import torch

from rlvr.trainer.algos.sft_loss import sft_loss


def test_sft_loss_by_hand_masks_the_prompt():
    # two rows, T = 4 target positions; row 0: prompt, prompt, completion, completion; row 1: prompt, completion,
    # completion, padding. Completion logprobs: row 0 log 0.5, log 0.25; row 1 log 0.5, log 0.125.
    # The prompt positions carry logprob -100: if the mask let any through, the loss would jump by >= 25.
    logprobs = torch.tensor([[-100.0, -100.0, math.log(0.5), math.log(0.25)],
                             [-100.0, math.log(0.5), math.log(0.125), -7.0]])  # [2, 4]
    mask = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]])  # [2, 4]
    loss, _ = sft_loss(logprobs, mask)
    # -(log 0.5 + log 0.25 + log 0.5 + log 0.125) / 4 = (1 + 2 + 1 + 3) ln 2 / 4 = 7/4 ln 2
    assert loss.item() == pytest.approx(7 / 4 * math.log(2), abs=1e-6)
    # micro-batches divide by the whole batch's 4 tokens and add up to it: row 0 (2 tokens) + row 1 (2 tokens)
    first, _ = sft_loss(logprobs[:1], mask[:1], num_tokens=mask.sum())
    second, _ = sft_loss(logprobs[1:], mask[1:], num_tokens=mask.sum())
    assert first.item() == pytest.approx(3 / 4 * math.log(2), abs=1e-6)
    assert (first + second).item() == pytest.approx(loss.item(), abs=1e-6)


def test_sft_loss_gradient_only_reaches_completion_tokens():
    logprobs = torch.randn(2, 5, requires_grad=True)  # [2, 5]
    mask = torch.tensor([[0.0, 0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0, 0.0]])  # [2, 5]
    sft_loss(logprobs, mask)[0].backward()
    assert torch.equal(logprobs.grad, -mask / 5)  # d/dlogp of -sum(mask * logp) / 5


trl = pytest.importorskip("trl")


def test_sft_loss_matches_trl_sft_trainer_completion_only(tiny_lm):
    """TRL 1.16's SFTTrainer (`completion_only_loss=True`, padding, no packing, loss_type nll) tokenises
    prompt/completion rows and labels the prompt -100; its `compute_loss` on its own collated batch equals
    `sft_loss` on the same ids packed by rlvr (`pack`: prompt, completion) through `token_logprobs`, in value and
    in every parameter's gradient."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from rlvr.trainer.models.logprobs import pack, token_logprobs

    assert trl.__version__.startswith("1.16."), f"written against TRL 1.16.x, found {trl.__version__}: re-read it"
    rows = [{"prompt": "1+2=", "completion": "<answer>3</answer>"}, {"prompt": "what is 7+8?", "completion": "15"},
            {"prompt": "4+4", "completion": "<think></think><answer>8</answer>"}]
    theirs_model, ours_model = tiny_lm.model(), tiny_lm.model()
    args = SFTConfig(output_dir=tempfile.mkdtemp(), completion_only_loss=True, report_to=[], use_cpu=True,
                     bf16=False, max_length=None, packing=False, loss_type="nll")
    trainer = SFTTrainer(model=theirs_model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tiny_lm.tokenizer)
    examples = [{"input_ids": r["input_ids"], "labels": r["labels"]} for r in trainer.train_dataset]
    split = [next(i for i, label in enumerate(e["labels"]) if label != -100) for e in examples]
    assert all(s > 0 for s in split), "TRL should mask each prompt"
    theirs_model.train()
    theirs = trainer.compute_loss(theirs_model, trainer.data_collator(examples))
    theirs.backward()

    batch = pack([e["input_ids"][:s] for e, s in zip(examples, split)],
                 [e["input_ids"][s:] for e, s in zip(examples, split)], tiny_lm.tokenizer.pad_token_id)
    ours_model.train()
    logprobs, _ = token_logprobs(ours_model, batch)  # [3, L-1]
    ours, _ = sft_loss(logprobs, batch.completion_mask)
    ours.backward()

    assert batch.completion_mask.sum().item() == sum(len(e["input_ids"]) - s for e, s in zip(examples, split))
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
    for (name, a), (_, b) in zip(ours_model.named_parameters(), theirs_model.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=1e-5, msg=name)
