"""HFEngine: the logprobs it returns are the trainer's logprobs of the same tokens, completions
stop where they should, and greedy decoding is deterministic."""

import pytest
import torch

from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.hf import HFEngine, _completion_length
from tests.forward_spy import grad_forwards


def _prompts_of_different_lengths(tokenizer):
    contents = ["3+4=", "1+2= then 5+6= then 7+8=", "9+9= and 2+2="]
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": c}], tokenize=False,
                                             add_generation_prompt=True) for c in contents]
    lengths = {len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts}
    assert len(lengths) == 3, "the prompts must differ in token length to exercise left padding"
    return prompts


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("which", ["random", "sft"])
def test_engine_logprobs_equal_trainer_logprobs(tiny_lm, tiny_lm_sft, which, temperature):
    lm = tiny_lm if which == "random" else tiny_lm_sft
    model, tok = lm.model(), lm.tokenizer
    engine = HFEngine(model, tok)
    torch.manual_seed(0)
    params = SamplingParams(n=3, max_new_tokens=16, temperature=temperature, top_k=0, top_p=1.0)
    rollout = engine.generate(_prompts_of_different_lengths(tok), params)

    assert len(rollout.completion_ids) == 9
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, batch, temperature)  # [N, L-1]
    for i, engine_logprobs in enumerate(rollout.logprobs):
        mask = batch.completion_mask[i].bool()
        assert int(mask.sum()) == len(rollout.completion_ids[i]) == len(engine_logprobs)
        torch.testing.assert_close(logprobs[i][mask], engine_logprobs, atol=1e-4, rtol=0)


def _logprobs_from_output_scores(engine, prompts, params):
    """What HFEngine returned before `SampledLogprobs`: `generate` with `output_scores=True`, the [B*G, T, V]
    processed scores stacked, the sampled token's `score - logsumexp(scores)`; cut like the engine's rows."""
    tok, model = engine.tokenizer, engine.model
    encoded = tok(prompts, add_special_tokens=False)["input_ids"]
    width = max(len(ids) for ids in encoded)
    input_ids = torch.full((len(encoded), width), tok.pad_token_id, dtype=torch.long)  # [B, P]
    attention_mask = torch.zeros_like(input_ids)  # [B, P]
    for i, ids in enumerate(encoded):
        input_ids[i, width - len(ids):], attention_mask[i, width - len(ids):] = torch.tensor(ids), 1
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=params.max_new_tokens,
                             num_return_sequences=params.n, do_sample=True, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id, output_scores=True, return_dict_in_generate=True,
                             temperature=params.temperature, top_p=params.top_p, top_k=params.top_k)
    scores = torch.stack(out.scores, dim=1).float()  # [B*G, T, V]
    sequences = out.sequences[:, width:]  # [B*G, T]
    picked = scores.gather(-1, sequences.unsqueeze(-1)).squeeze(-1)  # [B*G, T]
    logprobs = picked - scores.logsumexp(-1)  # [B*G, T]
    rows = []
    for row, ids in enumerate(sequences.tolist()):
        length = _completion_length(ids, tok, (), eos=tok.eos_token_id)[0]
        rows.append((ids[:length], logprobs[row, :length]))
    return rows


@pytest.mark.parametrize("temperature,top_p,top_k", [(1.0, 1.0, 0), (0.7, 0.9, 20), (0.7, 1.0, 0), (1.0, 0.8, 0)])
@pytest.mark.parametrize("which", ["random", "sft"])
def test_logprobs_equal_output_scores_computation(tiny_lm, tiny_lm_sft, which, temperature, top_p, top_k):
    """The engine records the sampled token's logprob inside `generate` (a logits processor after the warpers);
    on the same seed it samples the same tokens with the same logprobs as `output_scores` gave. The random
    model runs rows to the cap; the supervised one stops rows at different steps (later steps padded)."""
    lm = tiny_lm if which == "random" else tiny_lm_sft
    engine = HFEngine(lm.model(), lm.tokenizer)
    prompts = _prompts_of_different_lengths(lm.tokenizer)
    params = SamplingParams(n=4, max_new_tokens=24, temperature=temperature, top_p=top_p, top_k=top_k)
    torch.manual_seed(3)
    expected = _logprobs_from_output_scores(engine, prompts, params)
    torch.manual_seed(3)
    rollout = engine.generate(prompts, params)
    assert [ids for ids, _ in expected] == rollout.completion_ids
    if which == "sft":
        assert len({len(ids) for ids in rollout.completion_ids}) > 1, "rows must stop at different steps"
    for (_, want), got in zip(expected, rollout.logprobs):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)



@pytest.mark.parametrize("which", ["random", "sft"])
def test_one_prefill_per_prompt_samples_what_every_copy_prefilled_does(tiny_lm, tiny_lm_sft, which):
    """rollout.hf.prefill_once: each prompt's KV cache computed once and repeated G times gives, from the same seed,
    the completions `generate` samples when it prefills all G copies, with logprobs equal to the last bits;
    prompts of three lengths, so the left padding's positions are exercised."""
    lm = tiny_lm if which == "random" else tiny_lm_sft
    model, tok = lm.model(), lm.tokenizer
    prompts = _prompts_of_different_lengths(tok)
    params = SamplingParams(n=4, max_new_tokens=16, temperature=0.9)
    rollouts, prefills = [], []
    for prefill_once in (True, False):
        torch.manual_seed(0)
        with grad_forwards(type(model), grad_only=False) as forwards:
            rollouts.append(HFEngine(model, tok, prefill_once=prefill_once).generate(prompts, params))
        prefills.append([rows for rows, columns in forwards if columns > 1])  # the passes over prompt positions
    once, every = rollouts
    # the setting engaged (equal samples alone hold when it does nothing): the prompts' positions run through the
    # model once for the 3 prompts, not for their 12 copies; the decoding steps then see one position per row
    assert prefills == [[3], [12]], prefills
    assert once.completion_ids == every.completion_ids and once.prompt_ids == every.prompt_ids
    assert once.truncated == every.truncated
    for a, b in zip(once.logprobs, every.logprobs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)

def test_completions_end_with_eos_or_are_truncated(tiny_lm_sft):
    tok = tiny_lm_sft.tokenizer
    engine = HFEngine(tiny_lm_sft.model(), tok)
    torch.manual_seed(0)
    max_new = 6  # with EOS the SFT model's one-digit answers take 6 tokens, two-digit ones 7: both cases occur
    rollout = engine.generate(_prompts_of_different_lengths(tok), SamplingParams(n=4, max_new_tokens=max_new))
    ended = 0
    for ids, truncated in zip(rollout.completion_ids, rollout.truncated):
        assert tok.pad_token_id not in ids
        assert tok.eos_token_id not in ids[:-1]
        if truncated:
            assert len(ids) == max_new and ids[-1] != tok.eos_token_id
        else:
            assert ids[-1] == tok.eos_token_id
            ended += 1
    assert 0 < ended < len(rollout.completion_ids), f"want both EOS-ended and truncated rows, got {rollout.truncated}"
    assert rollout.num_tokens == sum(len(ids) for ids in rollout.completion_ids)


def test_stop_string_cuts_right_after_it(tiny_lm_sft, arith_env, assert_cut_right_after_stop):
    tok = tiny_lm_sft.tokenizer
    engine = HFEngine(tiny_lm_sft.model(), tok)
    prompts = render_prompts(tok, arith_env, arith_env.rows("train", 3, seed=0))
    torch.manual_seed(0)
    plain = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=16))
    assert any("</answer>" in text for text in plain.texts), "the SFT model should write </answer>"
    torch.manual_seed(0)
    stopped = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=16, stop=("</answer>",)))
    assert_cut_right_after_stop(stopped, tok, "</answer>")


def test_completion_length_on_stop_strings(tiny_lm):
    tok = tiny_lm.tokenizer
    ids = tok("<answer>12</answer> and more text", add_special_tokens=False)["input_ids"]
    n = len(tok("<answer>12</answer>", add_special_tokens=False)["input_ids"])
    assert _completion_length(ids, tok, ("</answer>",)) == (n, True)
    # A stop string spanning several tokens ends at the token that completes it.
    n_mid = len(tok("<answer>12</answer> and mo", add_special_tokens=False)["input_ids"])
    assert tok.decode(ids[:n_mid]).endswith("and mo")
    assert _completion_length(ids, tok, ("d mo",)) == (n_mid, True)
    # EOS wins when it comes first and is kept; no stop and no EOS means truncated.
    assert _completion_length(ids[:2] + [tok.eos_token_id] + ids[2:], tok, ("</answer>",)) == (3, True)
    assert _completion_length(ids, tok, ()) == (len(ids), False)
    assert _completion_length(ids, tok, ("never",)) == (len(ids), False)


PAD_BUG = ("rollout_hf._completion_length (the `token_id == tok.pad_token_id` branch) treats a sampled pad token "
           "as the end of a row that stopped: the completion is cut there and not marked truncated, though "
           "generate went on sampling")


def test_sampled_pad_token_is_not_a_stop(tiny_lm):
    """The pad token (<|endoftext|>) is an ordinary vocabulary item the policy can sample; generate
    only stops on EOS (<|im_end|>) and stop strings, so a row that samples it keeps going."""
    tok = tiny_lm.tokenizer
    ids = tok("<answer>12</answer>", add_special_tokens=False)["input_ids"]
    sampled = ids[:2] + [tok.pad_token_id] + ids[2:]  # what generate returns: no EOS, no stop string
    assert tok.pad_token_id != tok.eos_token_id
    assert _completion_length(sampled, tok, ()) == (len(sampled), False)


def test_random_policy_rows_end_with_eos_or_are_truncated(tiny_lm, arith_env):
    """End to end: 64 samples of 16 tokens from the random model draw the pad token a few times."""
    tok = tiny_lm.tokenizer
    prompts = render_prompts(tok, arith_env, arith_env.rows("train", 4, seed=0))
    torch.manual_seed(0)
    rollout = HFEngine(tiny_lm.model(), tok).generate(prompts, SamplingParams(n=16, max_new_tokens=16))
    for ids, truncated in zip(rollout.completion_ids, rollout.truncated):
        assert (ids[-1] == tok.eos_token_id) if not truncated else len(ids) == 16


def test_greedy_is_deterministic(tiny_lm_sft, arith_env):
    tok = tiny_lm_sft.tokenizer
    engine = HFEngine(tiny_lm_sft.model(), tok)
    prompts = render_prompts(tok, arith_env, arith_env.rows("test", 4, seed=0))
    params = SamplingParams(n=1, max_new_tokens=12, greedy=True)
    torch.manual_seed(1)
    first = engine.generate(prompts, params)
    torch.manual_seed(2)
    second = engine.generate(prompts, params)
    assert first.completion_ids == second.completion_ids and first.texts == second.texts


def test_generation_stops_at_the_model_context_and_counts_as_truncated(tiny_lm):
    """max_new_tokens past the model's context: HF generate would run the positions it was never trained on
    (vLLM stops at max_model_len); the engine stops at the context, and those completions are truncated."""
    model, tok = tiny_lm.model(), tiny_lm.tokenizer
    prompts = _prompts_of_different_lengths(tok)
    width = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)
    context = model.config.max_position_embeddings  # 128
    torch.manual_seed(0)
    long = SamplingParams(n=2, max_new_tokens=4 * context, temperature=1.0, stop=())
    rollout = HFEngine(model, tok).generate(prompts, long)
    lengths = [len(ids) for ids in rollout.completion_ids]
    assert max(lengths) == context - width
    assert all(rollout.truncated[i] for i, n in enumerate(lengths) if n == context - width)
