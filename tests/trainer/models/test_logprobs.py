"""token_logprobs computes logits only from the batch's first completion column on (HF's
`logits_to_keep`) and the softmax only at completion tokens; on a packed batch whose prompts and
completions differ in length it must equal the plain computation at every position, values,
entropy and gradients alike, and leave 0 outside the completion mask."""

import pytest
import torch

from rlvr.trainer.models.logprobs import pack, token_logprobs

# Prompt lengths 3, 7, 5 and completion lengths 4, 1, 6: rows are 7, 8, 11 tokens, L = 11, so
# the first completion column is min(prompt length) - 1 = 2 and the model keeps L - 2 = 9 positions.
PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]
COMPLETIONS = [[20, 21, 22, 23], [24], [25, 26, 27, 28, 29, 30]]


def plain_logprobs(model, batch, temperature):
    """The reference: logits at all L positions, log-softmax over the vocabulary at each."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]  # [N, L-1, V]
    logprobs_all = torch.log_softmax(logits.float() / temperature, dim=-1)  # [N, L-1, V]
    logprobs = logprobs_all.gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [N, L-1]
    entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)  # [N, L-1]
    return logprobs, entropy.detach()


class NoLogitsToKeep(torch.nn.Module):
    """A wrapper whose forward does not take `logits_to_keep` (as a PEFT model's): the slow path."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


def lora(model):
    import peft

    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)  # random B: not a no-op
    return peft.get_peft_model(model, config)


WRAPPERS = {"none": lambda m: m, "opaque": NoLogitsToKeep, "peft": lora}


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_completion_only_logprobs_equal_plain_computation(tiny_lm_sft, temperature, wrapper):
    batch = pack(PROMPTS, COMPLETIONS, tiny_lm_sft.tokenizer.pad_token_id)
    mask = batch.completion_mask.bool()  # [3, 10]
    assert batch.input_ids.shape == (3, 11) and mask.sum() == 4 + 1 + 6
    assert mask[:, :2].sum() == 0 and mask[0, 2], "column 2 (prompt length 3 - 1) is the first completion column"

    torch.manual_seed(0)  # the same random LoRA weights in both copies
    reference_model = WRAPPERS[wrapper](tiny_lm_sft.model())
    torch.manual_seed(0)
    model = WRAPPERS[wrapper](tiny_lm_sft.model())
    expected, expected_entropy = plain_logprobs(reference_model, batch, temperature)
    (expected * batch.completion_mask).sum().backward()

    logprobs, entropy = token_logprobs(model, batch, temperature, with_entropy=True)
    (logprobs * batch.completion_mask).sum().backward()

    assert logprobs.shape == entropy.shape == (3, 10)
    torch.testing.assert_close(logprobs[mask], expected[mask], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(entropy[mask], expected_entropy[mask], atol=1e-6, rtol=1e-6)
    assert torch.all(logprobs[~mask] == 0) and torch.all(entropy[~mask] == 0)
    assert torch.all(logprobs[mask] < 0)
    trained = [(name, p, q) for (name, p), q in zip(reference_model.named_parameters(), model.parameters())
               if p.requires_grad]
    assert trained
    for name, p, q in trained:
        torch.testing.assert_close(q.grad, p.grad, atol=1e-6, rtol=1e-5, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("wrapper", ["none", "peft"])
def test_keeps_only_positions_from_the_first_completion_column(tiny_lm_sft, wrapper):
    batch = pack(PROMPTS, COMPLETIONS, tiny_lm_sft.tokenizer.pad_token_id)
    causal_lm = tiny_lm_sft.model()
    model = WRAPPERS[wrapper](causal_lm)  # a PEFT model passes the keyword through to the causal LM
    seen = []
    causal_lm.register_forward_pre_hook(lambda _m, _a, kwargs: seen.append(kwargs.get("logits_to_keep")),
                                        with_kwargs=True)
    token_logprobs(model, batch)
    # positions 2..10 of 11: 9 = L - min prompt length + 1; the last one (predicting past the row) is dropped.
    assert seen == [11 - 3 + 1]
