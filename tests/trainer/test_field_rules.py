"""A key's own rule lives on its field (trainer/field_rules.py): one walk refuses a bad value, naming the key, and
`rlvr train --help` shows the rule.

Each refusal test also takes the rule off the field (its metadata emptied) and shows the same config then passes
`validate_train_config`: the field's rule is the one place that value is checked, not a second copy in validate.py.
"""

from dataclasses import fields
from types import MappingProxyType

import pytest

from rlvr.cli import main
from rlvr.help import COLUMN
from rlvr.errors import ConfigError
from rlvr.trainer import config as schema
from rlvr.trainer.field_rules import Rule, check_fields, rule
from rlvr.trainer.validate import validate_train_config


def _field(cls, name):
    return next(f for f in fields(cls) if f.name == name)


def _unruled(monkeypatch, cls, name):
    """The field without its rule, for the rest of the test."""
    monkeypatch.setattr(_field(cls, name), "metadata", MappingProxyType({}))


# (overrides, the field whose rule refuses them, the message users see: the wording validate.py had)
REFUSED = [
    pytest.param(["train.steps=0"], (schema.TrainLoopConfig, "steps"), "train.steps=0 must be >= 1", id="ge"),
    pytest.param(["optim.lr=0"], (schema.OptimConfig, "lr"), "optim.lr=0.0 must be > 0", id="gt"),
    pytest.param(["rollout.top_p=1.5"], (schema.RolloutConfig, "top_p"), "rollout.top_p=1.5 must be in (0, 1]",
                 id="interval"),
    pytest.param(["algo=dpo", "algo.label_smoothing=0.5"], (schema.DPOConfig, "label_smoothing"),
                 "algo.label_smoothing=0.5 must be in [0, 0.5)", id="interval-of-an-algo-family"),
    pytest.param(["optim.schedule=cosine_restarts"], (schema.OptimConfig, "schedule"),
                 "optim.schedule='cosine_restarts'; choose one of constant, linear, cosine", id="choices"),
    pytest.param(["logger=[tensorboard,csv]"], (schema.RunConfig, "logger"),
                 "logger=['tensorboard', 'csv']: unknown logger 'csv'; choose some of tensorboard, wandb",
                 id="each-item-of-a-list"),
    pytest.param(["train.logprob_chunk_tokens=-1"], (schema.TrainLoopConfig, "logprob_chunk_tokens"),
                 "train.logprob_chunk_tokens=-1 must be >= 0 (0: off)", id="with-a-note"),
    pytest.param(["model.kind=chat"], (schema.ModelConfig, "kind"),
                 "model.kind='chat' must be base or instruct (which prompt the built-in environments give the model)",
                 id="with-its-own-wording"),
    pytest.param(["reward.screen_mode=drop"], (schema.RewardConfig, "screen_mode"),
                 "reward.screen_mode='drop'; choose one of zero, drop_group", id="reward-section"),
    pytest.param(["algo=ppo", "algo.mu=0"], (schema.PPOConfig, "mu"), "algo.mu=0 must be >= 1", id="algo-ge"),
    pytest.param(["algo=dapo", "algo.kl_estimator=k4"], (schema.PolicyGradientConfig, "kl_estimator"),
                 "algo.kl_estimator='k4'; choose one of k1, k2, k3", id="algo-choices"),
    pytest.param(["algo=trpo", "algo.backtrack_ratio=1"], (schema.NaturalGradientConfig, "backtrack_ratio"),
                 "algo.backtrack_ratio=1.0 must be in (0, 1)", id="algo-open-interval"),
]


@pytest.mark.parametrize("overrides, where, message", REFUSED)
def test_a_bad_value_is_refused_by_its_fields_rule_naming_the_key(compose_train, monkeypatch, overrides, where,
                                                                   message):
    cfg = compose_train(overrides)
    with pytest.raises(ConfigError) as info:
        validate_train_config(cfg)
    assert str(info.value) == message
    _unruled(monkeypatch, *where)
    validate_train_config(cfg)  # nothing else checks it: the rule on the field is the one place


def test_null_passes_where_the_type_is_optional(compose_train):
    validate_train_config(compose_train(["rollout.importance_cap=null", "rollout.truncated_reward=null"]))
    with pytest.raises(ConfigError) as info:
        validate_train_config(compose_train(["rollout.importance_cap=0.5"]))
    assert str(info.value) == "rollout.importance_cap=0.5 must be >= 1 (or null to turn the correction off)"


def test_a_plain_dataclass_is_checked_for_its_scalar_types_too():
    """`RewardConfig(rate=True)` never went through OmegaConf, which would have refused it: the walk does."""
    for bad, message in [({"screen": "yes"}, "reward.screen='yes' must be true or false"),
                         ({"rate": True}, "reward.rate=True must be a number"),
                         ({"rate": 1.5}, "reward.rate=1.5 must be in [0, 1]"),
                         ({"kind": "spurious"}, "reward.kind='spurious'; choose one of env, random, format_only")]:
        with pytest.raises(ConfigError) as info:
            check_fields(schema.RewardConfig(**bad), schema.RewardConfig, "reward.")
        assert str(info.value) == message
    check_fields(schema.RewardConfig(), schema.RewardConfig, "reward.")
    check_fields(schema.RunConfig(), schema.RunConfig)  # every default keeps its own rule


def test_a_rule_is_bounds_or_choices():
    with pytest.raises(ValueError):
        Rule(ge=1, choices=("a",))
    with pytest.raises(ValueError):
        Rule()
    with pytest.raises(ValueError):
        Rule(ge=0, gt=0)
    assert [Rule(ge=1).shows(), Rule(gt=0, le=1).shows(nullable=True), rule(choices=["a", "b"])["rule"].shows()] \
        == ["(>= 1)", "(in (0, 1], or null)", "(one of: a, b)"]


def _help_line(capsys, key, *args):
    assert main(["train", "--help", "all", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {key}="))
    end = next(i for i in range(at + 1, len(lines) + 1) if i == len(lines) or not lines[i].startswith(" " * COLUMN))
    return " ".join(line.strip() for line in lines[at:end])  # the key's line and the meaning wrapped below it


def test_help_shows_each_keys_rule_from_its_field(capsys, monkeypatch):
    assert _help_line(capsys, "train.steps").startswith("train.steps=200 (>= 1)  ")  # beside the value it bounds
    assert _help_line(capsys, "rollout.vllm.gpu_memory_utilization").startswith(
        "rollout.vllm.gpu_memory_utilization=0.3 (in (0, 1])  ")
    assert _help_line(capsys, "algo.label_smoothing", "algo=dpo").startswith("algo.label_smoothing=0.0 (in [0, 0.5))")
    _unruled(monkeypatch, schema.TrainLoopConfig, "steps")
    assert "(>= 1)" not in _help_line(capsys, "train.steps")


def test_help_shows_choices_the_meaning_does_not_name(capsys, monkeypatch):
    """The docstrings of choice keys name their choices (`constant | linear | cosine`): shown once, not twice; a
    choice the docstring leaves out brings the rule in."""
    assert "one of:" not in _help_line(capsys, "optim.schedule")
    monkeypatch.setattr(_field(schema.OptimConfig, "schedule"), "metadata",
                        MappingProxyType(rule(choices=("constant", "linear", "cosine", "exponential"))))
    assert _help_line(capsys, "optim.schedule").startswith(
        "optim.schedule=constant (one of: constant, linear, cosine, exponential)  LR after warmup")


def test_choices_declared_on_fields_are_those_their_implementations_take():
    """The schema (and --help) imports no torch, so these tuples are written on the fields; here they are held
    equal to the modules that implement them."""
    from rlvr.trainer.algos.advantages import BASELINES
    from rlvr.trainer.algos.distill_loss import LOSSES as DISTILL_LOSSES
    from rlvr.trainer.algos.dpo_loss import LOSS_TYPES
    from rlvr.trainer.algos.losses import AGGREGATIONS, IMPORTANCE_LEVELS, KL_ESTIMATORS
    from rlvr.trainer.algos.pairs import STRATEGIES
    from rlvr.trainer.distributed import STRATEGIES as PARALLEL
    from rlvr.trainer.experience.rewards import SCREEN_MODES
    from rlvr.trainer.models.critic import CRITICS

    assert schema.DPO_LOSS_TYPES == LOSS_TYPES and schema.PAIR_STRATEGIES == STRATEGIES
    assert schema.PARALLEL_STRATEGIES == PARALLEL and schema.SCREEN_MODES == SCREEN_MODES
    assert (schema.KL_ESTIMATORS, schema.AGGREGATIONS, schema.IMPORTANCE_LEVELS) \
        == (KL_ESTIMATORS, AGGREGATIONS, IMPORTANCE_LEVELS)
    assert (schema.BASELINES, schema.CRITICS, schema.DISTILL_LOSSES) == (BASELINES, CRITICS, DISTILL_LOSSES)


def test_an_algo_section_without_its_schema_is_checked_by_its_familys_field_rules(compose_train):
    """A config built from plain data (OmegaConf.create of a saved run's dict) carries no dataclass: the walk from
    RunConfig sees only AlgoSchema there, so validate_algo walks the family's schema for it."""
    from omegaconf import OmegaConf

    plain = OmegaConf.create(OmegaConf.to_container(compose_train(["algo=ppo", "algo.mu=0"])))
    assert OmegaConf.get_type(plain.algo) is dict
    with pytest.raises(ConfigError) as info:
        validate_train_config(plain)
    assert str(info.value) == "algo.mu=0 must be >= 1"
