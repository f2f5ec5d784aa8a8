"""rlvr's verl reward functions inside verl's own reward managers (skipped where verl is not importable).

verl 0.9.1 pins transformers<5.11 and ray, and rlvr runs transformers 5.19, so verl is not among rlvr's
dependencies and `make test` skips this file; tests/envs/test_reward_functions.py calls the two signatures as verl
does. Here verl itself loads and calls them. To run it (2026-12-07: verl 0.9.1's reward managers import and run
beside transformers 5.19 and torch 2.13 on CPU; the pin is not needed for this part of verl):

    pip install --no-deps --target DIR verl==0.9.1 ray tensordict==0.10.0 codetiming pyvers orjson
    PYTHONPATH=DIR .venv/bin/python -m pytest tests/integrations/test_verl_reward_manager.py -p no:randomly

verl loads the function from the file and name its config gives (`reward.custom_reward_function.path` and
`.name`, through `verl.trainer.ppo.reward.get_custom_reward_fn`), decodes each response with the tokenizer and
calls it: the naive manager of its reward loop (`reward.reward_manager.name=naive`, the default) once per sample,
the batch manager class (`verl/workers/reward_manager/batch.py`; 0.9.1's trainer no longer selects it) once with
lists. The data source is a name verl's own
scorers do not know, so a reward can only come from rlvr's verifier (verl's default raises on it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlvr.integrations.reward_functions as reward_functions

pytest.importorskip("verl")
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.workers.reward_manager.batch import BatchRewardManager  # noqa: E402

# (completion, gold, rlvr's verdict): equal values in other forms, a wrong value, no answer, and an identity only a
# symbolic check finds
MATH = [("<answer>\\frac{1}{2}</answer>", "0.5", 1.0), ("<answer>3</answer>", "4", 0.0),
        ("no answer here", "7", 0.0), ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0)]


@pytest.fixture(scope="module")
def tokenizer():
    from rlvr.trainer.models.tiny_model import train_tokenizer

    return train_tokenizer([c for c, _, _ in MATH] + ["What is it?"], 300)  # byte-level: any text round-trips


def batch(tokenizer, rows) -> DataProto:
    """verl's rollout output for `rows`: prompt and response ids, right-padded responses, the attention mask over
    both, and the reward model's ground truth per sample."""
    prompt = tokenizer("What is it?", add_special_tokens=False)["input_ids"]
    responses = [tokenizer(c, add_special_tokens=False)["input_ids"] for c, _, _ in rows]
    width = max(map(len, responses)) + 2  # padding after every response: the manager must cut it
    pad = tokenizer.pad_token_id
    response_ids = torch.tensor([r + [pad] * (width - len(r)) for r in responses])  # [B, R]
    mask = torch.tensor([[1] * len(prompt) + [1] * len(r) + [0] * (width - len(r)) for r in responses])  # [B, P+R]
    return DataProto.from_dict(
        tensors={"prompts": torch.tensor([prompt] * len(rows)), "responses": response_ids, "attention_mask": mask},
        non_tensors={"data_source": np.array(["my_dataset"] * len(rows), dtype=object),
                     "reward_model": np.array([{"ground_truth": g} for _, g, _ in rows], dtype=object),
                     "extra_info": np.array([{} for _ in rows], dtype=object)})


def loaded(name: str):
    """The reward function as verl loads it from its config."""
    config = OmegaConf.create({"reward": {"custom_reward_function": {"path": reward_functions.__file__, "name": name}}})
    return get_custom_reward_fn(config)


def test_compute_score_in_verls_naive_reward_loop_manager(tokenizer):
    manager = NaiveRewardManager(OmegaConf.create({}), tokenizer, loaded("compute_score"))
    data = batch(tokenizer, MATH)
    results = [manager.loop.run_until_complete(manager.run_single(data[i:i + 1])) for i in range(len(MATH))]
    assert [r["reward_score"] for r in results] == [v for _, _, v in MATH]
    assert [r["reward_extra_info"]["acc"] for r in results] == [v for _, _, v in MATH]


def test_compute_score_batch_in_verls_batch_reward_manager(tokenizer):
    manager = BatchRewardManager(tokenizer, num_examine=0, compute_score=loaded("compute_score_batch"))
    data = batch(tokenizer, MATH)
    out = manager(data, return_dict=True)
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[-1]:].sum(-1)
    expected = torch.zeros_like(out["reward_tensor"])  # [B, R]: the reward on each response's last token
    for i, (_, _, verdict) in enumerate(MATH):
        expected[i, lengths[i] - 1] = verdict
    assert torch.equal(out["reward_tensor"], expected)
    assert out["reward_extra_info"]["acc"] == [v for _, _, v in MATH]


def test_verls_own_scorer_does_not_know_the_data_source(tokenizer):
    """The check that the rewards above are rlvr's: verl's default scorer refuses this data source."""
    from verl.utils.reward_score import default_compute_score

    with pytest.raises(NotImplementedError):
        default_compute_score("my_dataset", MATH[0][0], MATH[0][1])

