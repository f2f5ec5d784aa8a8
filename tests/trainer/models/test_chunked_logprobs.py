"""`train.logprob_chunk_tokens`: the chunked log-softmax-and-gather (trainer/models/chunked_logprobs.py)
gives the plain computation's values, entropies and gradients (fp32, tight tolerance) at chunk sizes
that divide the token count, that do not, of 1, and larger than it; through `token_logprobs` on a model. Spies on
`torch.log_softmax` and on the chunked function show the chunked path was the one taken."""

import pytest
import torch

from rlvr.trainer.models.chunked_logprobs import chunked_logprobs_from_logits
from rlvr.trainer.models.logprobs import logprobs_from_logits, pack, token_logprobs

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]
COMPLETIONS = [[20, 21, 22, 23], [24], [25, 26, 27, 28, 29, 30]]  # 11 completion tokens


@pytest.fixture
def softmax_positions(monkeypatch):
    """The positions each `torch.log_softmax` call covers (its input's size over all but the vocabulary axis) and
    whether it ran with gradients on: the chunked path never takes more than `chunk` at once, the plain path takes
    them all in one call. The equality tests alone pass when the chunked path is never taken; this shows it was."""
    calls: list[tuple[int, bool]] = []
    original = torch.log_softmax

    def spy(input, dim=None, *args, **kwargs):
        calls.append((input.numel() // input.shape[-1], torch.is_grad_enabled()))
        return original(input, dim, *args, **kwargs)

    monkeypatch.setattr(torch, "log_softmax", spy)
    return calls


@pytest.fixture
def chunked_calls(monkeypatch):
    """(chunk, grad enabled) of each call `logprobs_from_logits` makes to the chunked function."""
    import rlvr.trainer.models.logprobs as logprobs_module

    calls: list[tuple[int, bool]] = []
    original = logprobs_module.chunked_logprobs_from_logits

    def spy(logits, targets, temperature, with_entropy, chunk):
        calls.append((chunk, torch.is_grad_enabled()))
        return original(logits, targets, temperature, with_entropy, chunk)

    monkeypatch.setattr(logprobs_module, "chunked_logprobs_from_logits", spy)
    return calls


def _values_and_grads(chunk: int, temperature: float):
    torch.manual_seed(0)
    logits = (3 * torch.randn(4, 7, 50, dtype=torch.float32)).requires_grad_(True)  # [N, T, V]: M = 28
    targets = torch.randint(0, 50, (4, 7))
    weights = torch.randn(4, 7)  # a loss that weighs each position differently
    logprobs, entropy = logprobs_from_logits(logits, targets, temperature, True, chunk_tokens=chunk)
    (logprobs * weights).sum().backward()
    return logprobs.detach(), entropy, logits.grad


@pytest.mark.parametrize("chunk", [1, 5, 7, 28, 100])  # 5 does not divide 28; 100 > 28
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_equals_plain_on_logits(chunk, temperature):
    expected, expected_entropy, expected_grad = _values_and_grads(0, temperature)
    logprobs, entropy, grad = _values_and_grads(chunk, temperature)
    assert logprobs.shape == (4, 7) and entropy.shape == (4, 7)
    torch.testing.assert_close(logprobs, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy, expected_entropy, rtol=0, atol=1e-6)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-6)


def test_chunk_below_one_is_refused():
    with pytest.raises(ValueError, match="chunk=0"):
        chunked_logprobs_from_logits(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), 1.0, False, 0)


@pytest.mark.parametrize("chunk", [1, 4, 11])
def test_token_logprobs_chunked_equals_plain(tiny_lm_sft, chunk, softmax_positions):
    batch = pack(PROMPTS, COMPLETIONS, tiny_lm_sft.tokenizer.pad_token_id)
    plain_model, chunked_model = tiny_lm_sft.model(), tiny_lm_sft.model()
    expected, expected_entropy = token_logprobs(plain_model, batch, 0.7, with_entropy=True)
    assert softmax_positions == [(11, True)]  # the plain path: the 11 completion positions in one call
    softmax_positions.clear()
    logprobs, entropy = token_logprobs(chunked_model, batch, 0.7, with_entropy=True, chunk_tokens=chunk)
    # chunk-sized pieces (the forward's pick and its entropy pass), covering the positions scored twice over
    positions = [n for n, _ in softmax_positions]
    assert max(positions) <= chunk and sum(positions) >= 2 * 11, softmax_positions
    (expected * batch.completion_mask).sum().backward()
    (logprobs * batch.completion_mask).sum().backward()
    torch.testing.assert_close(logprobs, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy, expected_entropy, rtol=0, atol=1e-6)
    assert (logprobs[batch.completion_mask == 0] == 0).all()
    for (name, p), q in zip(plain_model.named_parameters(), chunked_model.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-6)  # float32 rounding of sums


@pytest.mark.parametrize("overrides", [["algo=grpo"], ["algo=gspo", "algo.mu=2"], ["algo=reinforce"], ["algo=ppo"]],
                         ids=lambda o: "-".join(x.split("=")[1] for x in o))
def test_a_step_with_chunked_logprobs_equals_the_plain_step(tiny_lm_sft, compose_train, overrides, chunked_calls):
    from tests.step_grads import assert_same_step, step_gradients

    plain = step_gradients(compose_train, tiny_lm_sft, overrides)
    assert chunked_calls == []
    chunked = step_gradients(compose_train, tiny_lm_sft, overrides + ["train.logprob_chunk_tokens=7"])
    # the chunked path taken for the differentiated loss (PPO scores its old logprobs, without gradients, whole)
    assert (7, True) in chunked_calls and {chunk for chunk, _ in chunked_calls} == {7}, chunked_calls
    assert_same_step(plain, chunked)


@pytest.mark.parametrize("overrides,match", [
    (["train.logprob_chunk_tokens=-1"], "train.logprob_chunk_tokens=-1 must be >= 0"),
    (["algo=trpo", "train.logprob_chunk_tokens=8"], "train.logprob_chunk_tokens=8: algo=trpo"),
])
def test_bad_chunk_settings_are_refused(compose_train, overrides, match):
    from rlvr.errors import ConfigError
    from rlvr.trainer.validate import validate_train_config

    with pytest.raises(ConfigError, match=match):
        validate_train_config(compose_train(overrides))
