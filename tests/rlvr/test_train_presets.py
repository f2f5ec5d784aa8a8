"""`train=fast` (conf/train/fast.yaml): token-budget micro-batches, the same loss and gradients as the plain path."""

import math
import random
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from rlvr.errors import ConfigError
from rlvr.trainer.algos.grpo import accumulate_gradients
from rlvr.trainer.models.logprobs import pack
from rlvr.trainer.validate import validate_train_config
from tests.forward_spy import grad_forwards


def test_fast_sets_the_token_budget_and_nothing_else(compose_train):
    plain, fast = compose_train(["model=smollm2"]), compose_train(["model=smollm2", "train=fast"])
    assert plain.train.max_tokens_per_micro_batch == 0 and fast.train.max_tokens_per_micro_batch == 2048
    fast.train.max_tokens_per_micro_batch = 0
    assert OmegaConf.to_container(fast, resolve=False) == OmegaConf.to_container(plain, resolve=False)
    assert compose_train(["train=fast", "train.max_tokens_per_micro_batch=512"]).train.max_tokens_per_micro_batch == 512


def test_fast_with_an_algorithm_that_does_not_read_it_is_refused_by_name(compose_train):
    with pytest.raises(ConfigError, match="train.max_tokens_per_micro_batch"):
        validate_train_config(compose_train(["train=fast", "algo=trpo"]))


def test_fast_gives_the_plain_paths_loss_and_gradients(tiny_lm_sft, compose_train):
    """The preset's values against model=smollm2's own micro-batches, on a batch with a length mix (8 prompts x 4
    completions of 2-40 tokens, 1,000 positions between them; the budget cuts it into several micro-batches)."""
    rng = random.Random(0)
    prompts = [[rng.randrange(5, 100) for _ in range(rng.randrange(6, 14))] for _ in range(8) for _ in range(4)]
    completions = [[rng.randrange(5, 100) for _ in range(round(math.exp(rng.uniform(math.log(2), math.log(40)))))]
                   for _ in prompts]
    batch = pack(prompts, completions, pad_id=0)
    advantages = torch.randn(len(batch), generator=torch.Generator().manual_seed(1))
    results, forwards = {}, {}
    for name, overrides in (("plain", ["model=smollm2", "train.micro_batch_size=8"]),
                            ("fast", ["model=smollm2", "train.micro_batch_size=8", "train=fast",
                                      "train.max_tokens_per_micro_batch=256"])):  # the budget scaled to the batch
        cfg = compose_train(overrides)
        model = tiny_lm_sft.model()
        algo = SimpleNamespace(**OmegaConf.to_container(cfg.algo))
        with grad_forwards(type(model)) as forwards[name]:
            metrics = accumulate_gradients(model, batch, advantages, None, None, algo,
                                           micro_batch_size=cfg.train.micro_batch_size, temperature=1.0,
                                           max_tokens=40, token_budget=cfg.train.max_tokens_per_micro_batch,
                                           pack=cfg.train.pack_sequences)
        results[name] = (metrics["loss"], torch.cat([p.grad.flatten() for p in model.parameters()]))
    (plain_loss, plain_grad), (fast_loss, fast_grad) = results["plain"], results["fast"]
    assert fast_loss == pytest.approx(plain_loss, abs=1e-6)
    torch.testing.assert_close(fast_grad, plain_grad, rtol=1e-4, atol=1e-6)
    # the preset engaged (equal gradients alone hold when it does nothing): 4 forward passes of 8 padded rows
    # against more, smaller ones, each within the budget
    assert [rows for rows, _ in forwards["plain"]] == [8, 8, 8, 8], forwards["plain"]
    assert len(forwards["fast"]) > 4 and sum(rows for rows, _ in forwards["fast"]) == 32, forwards["fast"]
    assert all(rows * width <= 256 or rows == 1 for rows, width in forwards["fast"]), forwards["fast"]


def test_a_resume_with_fast_takes_its_keys_and_keeps_the_runs_others(compose_train, tmp_path):
    from rlvr.trainer.resume_config import resumed_config

    saved = OmegaConf.to_container(compose_train(["train.steps=7", "train.micro_batch_size=16"]), resolve=False)
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "config.yaml")
    given = [f"resume={tmp_path}", "train=fast"]
    cfg = resumed_config(compose_train(given), given)
    assert (cfg.train.steps, cfg.train.micro_batch_size, cfg.train.max_tokens_per_micro_batch) == (7, 16, 2048)


def test_the_python_api_takes_the_preset_by_name():
    from rlvr.api import TRAIN_GROUPS, to_overrides

    assert to_overrides([], {"train": "fast"}, TRAIN_GROUPS) == ["train=fast"]
