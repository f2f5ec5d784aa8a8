"""The checks of `algo.*` values that span several keys live with the algorithms (trainer/algos/key_checks.py)
and are named by each row (`check_keys`): each refuses its case naming the keys, and a row without the check lets
the same config through, so the row is what runs it."""

from __future__ import annotations

import dataclasses

import pytest

from rlvr.errors import ConfigError
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.validate import validate_train_config

CASES = [
    ("gspo", ["algo.aggregation=token_mean"], "needs algo.aggregation=seq_mean_token_mean"),
    ("dapo", ["algo.overlong_buffer=16", "rollout.max_new_tokens=16"], "algo.overlong_buffer=16 must be < rollout"),
    ("grpo", ["algo.max_resample_rounds=1", "algo.filter_zero_variance_groups=false"],
     "algo.max_resample_rounds=1 refills the batch"),
    ("trpo", ["algo.fisher_every=100", "train.prompts_per_step=2", "train.completions_per_prompt=2"],
     r"algo.fisher_every=100 must be at most the step's completions \(4\)"),
    ("distill", ["algo.teacher=t", "algo.reward_weight=0.5", "train.completions_per_prompt=1"],
     r"algo.reward_weight=0.5 .* train.completions_per_prompt >= 2, not 1"),
]


@pytest.mark.parametrize("name,overrides,message", CASES, ids=[case[0] for case in CASES])
def test_a_cross_key_rule_is_refused_by_its_rows_check(compose_train, monkeypatch, name, overrides, message):
    cfg = compose_train([f"algo={name}", *overrides])
    with pytest.raises(ConfigError, match=message):
        validate_train_config(cfg)
    monkeypatch.setitem(ALGORITHMS, name, dataclasses.replace(ALGORITHMS[name], check_keys=None))
    validate_train_config(cfg)  # without the row's check nothing else refuses it
