"""TRL's GRPOConfig in rlvr's keys (trainer/trl_keys.py, docs/training/from-trl.md): every mapped field becomes the
documented rlvr value in the composed config, every other field a user sets is refused by name, the docs table is
the rendered map, and `rlvr.train(trl_config=GRPOConfig(...))` trains."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

trl = pytest.importorskip("trl")

from rlvr import api  # noqa: E402
from rlvr.errors import ConfigError  # noqa: E402
from rlvr.trainer.trl_keys import ROWS, markdown_table, translate  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "training" / "from-trl.md"
FIELDS = {f.name: f for f in dataclasses.fields(trl.GRPOConfig)}
MAPPED = {name for row in ROWS for name in row.trl}

# (GRPOConfig fields set, {rlvr key: the value it composes to}); together they set every mapped field
CASES = [
    ({"num_generations": 4, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 3},
     {"train.completions_per_prompt": 4, "train.prompts_per_step": 6, "train.micro_batch_size": 8}),
    ({"steps_per_generation": 2, "gradient_accumulation_steps": 2, "num_generations": 2},
     {"train.completions_per_prompt": 2, "train.prompts_per_step": 8}),
    ({"generation_batch_size": 16, "gradient_accumulation_steps": 2},
     {"train.prompts_per_step": 2, "train.completions_per_prompt": 8}),
    ({"max_completion_length": 77}, {"rollout.max_new_tokens": 77}),
    ({"beta": 0.04}, {"algo.beta": 0.04}),
    ({"epsilon": 0.1}, {"algo.clip_eps_low": 0.1, "algo.clip_eps_high": 0.1}),
    ({"epsilon_high": 0.28}, {"algo.clip_eps_low": 0.2, "algo.clip_eps_high": 0.28}),
    ({"loss_type": "grpo"}, {"algo.aggregation": "seq_mean_token_mean"}),
    ({"loss_type": "dapo"}, {"algo.aggregation": "token_mean"}),
    ({"loss_type": "bnpo"}, {"algo.aggregation": "token_mean"}),
    ({"loss_type": "dr_grpo"}, {"algo.aggregation": "seq_mean_token_sum_norm"}),
    ({"scale_rewards": "none"}, {"algo.scale_advantages_by_std": False}),
    ({"scale_rewards": False}, {"algo.scale_advantages_by_std": False}),
    ({"scale_rewards": "group"}, {"algo.scale_advantages_by_std": True}),
    ({"num_iterations": 3}, {"algo.mu": 3}),
    ({"importance_sampling_level": "sequence"}, {"algo.importance_level": "sequence"}),
    ({"temperature": 0.7, "top_p": 0.9, "top_k": 5},
     {"rollout.temperature": 0.7, "rollout.top_p": 0.9, "rollout.top_k": 5}),
    ({"min_p": 0.05, "repetition_penalty": 1.2}, {"rollout.min_p": 0.05, "rollout.repetition_penalty": 1.2}),
    ({"generation_kwargs": {"no_repeat_ngram_size": 3}}, {"rollout.generation_kwargs": {"no_repeat_ngram_size": 3}}),
    ({"use_vllm": True, "vllm_gpu_memory_utilization": 0.5, "vllm_tensor_parallel_size": 2,
      "vllm_enable_sleep_mode": True},
     {"rollout.engine": "vllm", "rollout.vllm.gpu_memory_utilization": 0.5, "rollout.vllm.tensor_parallel_size": 2,
      "rollout.vllm.enable_sleep_mode": True}),
    ({"use_vllm": True, "vllm_mode": "server"}, {"rollout.engine": "server"}),
    ({"vllm_mode": "server"}, {"rollout.engine": "auto"}),  # without use_vllm, as in TRL: no effect
    ({"use_vllm": True, "vllm_importance_sampling_correction": False},
     {"rollout.engine": "vllm", "rollout.importance_cap": None}),
    ({"learning_rate": 3e-6, "weight_decay": 0.01, "adam_beta1": 0.8, "adam_beta2": 0.95, "max_grad_norm": 0.5,
      "warmup_steps": 5, "lr_scheduler_type": "cosine"},
     {"optim.lr": 3e-6, "optim.weight_decay": 0.01, "optim.betas": [0.8, 0.95], "optim.max_grad_norm": 0.5,
      "optim.warmup_steps": 5, "optim.schedule": "cosine"}),
    ({"max_steps": 7, "save_steps": 3, "eval_steps": 2}, {"train.steps": 7, "train.save_every": 3,
                                                         "train.eval_every": 2}),
    ({"seed": 5, "output_dir": "runs/x"}, {"seed": 5, "output_dir": "runs/x"}),
    ({"use_cpu": True, "gradient_checkpointing": True, "bf16": True},
     {"train.device": "cpu", "model.gradient_checkpointing": True, "model.autocast": "bf16"}),
    ({"bf16": False}, {"model.autocast": "none"}),
    ({"logging_steps": 1, "disable_tqdm": True, "log_completions": True}, {}),
    ({"push_to_hub": True, "hub_model_id": "me/run", "hub_private_repo": True, "hub_strategy": "every_save"},
     {"train.push_to_hub": True, "train.hub_model_id": "me/run", "train.hub_private_repo": True}),
]


def _resolved(cfg, key):
    from omegaconf import OmegaConf

    node = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(node) if OmegaConf.is_config(node) else node


@pytest.mark.parametrize("fields,expected", CASES, ids=[",".join(c[0]) for c in CASES])
def test_each_mapped_field_becomes_its_rlvr_key(fields, expected, compose_train):
    overrides = translate(fields).overrides
    assert {o.split("=", 1)[0] for o in overrides} >= {k for k in expected if k != "rollout.engine"} - {"rollout"}
    cfg = compose_train(overrides)
    for key, value in expected.items():
        assert _resolved(cfg, key) == pytest.approx(value), key


def test_the_cases_cover_every_mapped_field_and_reward_weights_go_to_train():
    assert MAPPED <= FIELDS.keys()  # the map names TRL 1.16's fields
    assert MAPPED - {"reward_weights"} == {name for fields, _ in CASES for name in fields}
    assert translate({"reward_weights": [1, 0.5]}).reward_weights == [1.0, 0.5]


def _non_default(f: dataclasses.Field):
    default = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 3
    if isinstance(default, str):
        return default + "_other"
    if isinstance(default, (list, dict)):
        return ["x"] if isinstance(default, list) else {"x": 1}
    return 3  # None: any value is set


@pytest.mark.parametrize("name", sorted(set(FIELDS) - MAPPED))
def test_every_other_field_set_is_refused_by_name(name):
    value = _non_default(FIELDS[name])
    with pytest.raises(ConfigError, match=rf"rlvr cannot honour .*\b{re.escape(name)}=.*\(") as error:
        translate({name: value})
    assert "; " not in str(error.value)  # that field alone, with its reason


@pytest.mark.parametrize("fields,refused", [
    ({"loss_type": "cispo"}, "loss_type"), ({"scale_rewards": "batch"}, "scale_rewards"),
    ({"warmup_steps": 0.1}, "warmup_steps"), ({"lr_scheduler_type": "polynomial"}, "lr_scheduler_type"),
    ({"steps_per_generation": 4}, "steps_per_generation"), ({"num_generations": 3}, "num_generations"),
    ({"use_vllm": True, "vllm_mode": "other"}, "use_vllm"), ({"hub_strategy": "end"}, "hub_strategy"),
])
def test_a_mapped_field_with_a_value_rlvr_cannot_honour_is_refused(fields, refused):
    with pytest.raises(ConfigError, match=rf"\b{refused}=.*\("):
        translate(fields)


def test_unknown_keys_and_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not GRPOConfig fields: num_generation$"):
        translate({"num_generation": 4})
    path = tmp_path / "grpo.yaml"
    path.write_text("num_generations: 4\nbeta: 0.04\n")
    assert translate(path).overrides == ["train.completions_per_prompt=4", "train.prompts_per_step=2",
                                         "train.micro_batch_size=8", "algo.beta=0.04"]


def test_a_grpo_config_object_translates_only_what_was_set():
    """TRL's __post_init__ sets bf16, generation_batch_size, report_to...: none of them reads as the user's."""
    args = trl.GRPOConfig(output_dir="runs/x", use_cpu=True, num_generations=2, per_device_train_batch_size=4,
                          max_completion_length=8, beta=0.04, max_steps=2)
    assert sorted(translate(args).overrides) == sorted([
        "output_dir=runs/x", "train.device=cpu", "train.completions_per_prompt=2", "train.prompts_per_step=2",
        "train.micro_batch_size=4", "rollout.max_new_tokens=8", "algo.beta=0.04", "train.steps=2"])
    with pytest.raises(ConfigError, match=r"mask_truncated_completions=True \(rlvr keeps"):
        translate(trl.GRPOConfig(output_dir="x", use_cpu=True, mask_truncated_completions=True))


def test_the_docs_table_is_the_rendered_map():
    page = DOCS.read_text()
    table = page.split("<!-- trl-keys:start -->\n", 1)[1].split("<!-- trl-keys:end -->", 1)[0]
    assert table == markdown_table()


def test_explicit_overrides_win_over_translated_ones(monkeypatch):
    seen = {}

    def stop(args):
        seen["args"] = args
        raise RuntimeError("composed")

    monkeypatch.setattr(api, "train_config", stop)
    with pytest.raises(RuntimeError, match="composed"):
        api.train("train.steps=2", trl_config={"max_steps": 9, "beta": 0.04, "reward_weights": [2.0]},
                  rollout="hf", reward_funcs=["m:f"])
    args = seen["args"]
    assert "train.steps=2" in args and "train.steps=9" not in args and "algo.beta=0.04" in args
    assert any("weight:2.0" in o for o in args)  # the config's reward_weights weigh reward_funcs


def test_train_runs_two_steps_from_a_grpo_config(tmp_path, tiny_lm, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = trl.GRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, num_generations=2,
                          per_device_train_batch_size=2, max_completion_length=8, max_steps=2, save_steps=2,
                          learning_rate=1e-4)
    run = api.train(trl_config=args, model={"name": "hf", "name_or_path": str(tiny_lm.path)}, rollout="hf",
                    train={"eval_prompts": 2}, log=lambda *a, **k: None)
    assert [m["step"] for m in run.metrics] == [0, 1, 2]
    assert run.checkpoint == run.run_dir / "checkpoints" / "step_2"
    config = (run.run_dir / "config.yaml").read_text()
    assert "completions_per_prompt: 2" in config and "prompts_per_step: 1" in config
    assert "max_new_tokens: 8" in config and "device: cpu" in config


def test_reward_weights_without_reward_funcs_are_refused(monkeypatch):
    """TRL weighs its reward_funcs; with none given rlvr runs the env's reward, which the weights cannot weigh."""
    monkeypatch.setattr(api, "train_config", lambda args: pytest.fail(f"composed a run from {args}"))
    with pytest.raises(ConfigError, match="reward_weights without reward_funcs"):
        api.train(trl_config={"reward_weights": [1.0, 2.0]})


def test_without_trl_a_config_is_refused_with_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "trl", None)  # `import trl` raises ImportError, as where TRL is not installed
    with pytest.raises(ConfigError, match=r"needs TRL \(pip install"):
        translate({"num_generations": 4})
