"""The tiny model's warm start gives up when its checks stall short of the target, keeps its progress when it is
killed, and its cache entry says how it ended (trainer/warm_start.py, trainer/models/tiny_model.py)."""

import json

import pytest
import torch

from rlvr.envs import load_env
from rlvr.trainer.models import tiny_model
from rlvr.trainer import warm_start as warm_start_module
from rlvr.trainer.models.tiny_model import build_tiny, tiny_model_path
from rlvr.trainer.warm_start import warm_start

# validation accuracy by step of the default arithmetic build (seed 0's warm_start.json): a slow rise, then the jump
ARITHMETIC = [(25, 0.0), (50, 0.01), (75, 0.025), (100, 0.01), (125, 0.015), (150, 0.025), (175, 0.035), (200, 0.03),
              (225, 0.005), (250, 0.035), (275, 0.03), (300, 0.055), (325, 0.045), (350, 0.035), (375, 0.09),
              (400, 0.065), (425, 0.09), (450, 0.09), (475, 0.16)]
# guess_number trained on one-turn answers (a real run's checks): 8-16% at every check against a 30% target
NOISE = [0.12, 0.08, 0.16, 0.10, 0.14, 0.135, 0.09, 0.115]


def first_stop(accuracy, max_steps=3000, every=25, low=0.3):
    """(step, reason) at the first check where `give_up_reason` fires, `accuracy(step)` giving each check's value."""
    history = []
    for step in range(every, max_steps + 1, every):
        history.append({"step": step, "val_accuracy": accuracy(step)})
        reason = warm_start_module.give_up_reason(history, max_steps, every, low)
        if reason:
            return step, reason
    return None, None


def test_a_plateau_short_of_the_target_gives_up_two_windows_in():
    # the old rule (half of max_steps, best under a quarter of the target) never fired here: 16% > 7.5%
    step, reason = first_stop(lambda s: NOISE[s // 25 % len(NOISE)])
    assert step == 600, reason  # windows of 300 steps (a tenth of max_steps): steps 1-300, then 301-600
    assert "over steps 1-300" in reason and "over steps 301-600" in reason and "below the target 30%" in reason
    # ... and a tool transcript warm start stuck at 84% against 90%, two windows after it got there
    step, _ = first_stop(lambda s: 0.0 if s < 1100 else 0.84, low=0.9)
    assert step == 1100 + 2 * 300 - 25


def test_a_rise_too_slow_to_arrive_gives_up_and_the_real_curves_do_not():
    step, reason = first_stop(lambda s: 0.10 + 0.00002 * s)  # +0.6 points a window: 16% at step 3000
    assert step == 600 and "at that rate it would be" in reason
    history = [{"step": s, "val_accuracy": a} for s, a in ARITHMETIC]
    give_up = warm_start_module.give_up_reason
    assert all(give_up(history[:n], 3000, 25, 0.3) is None for n in range(1, len(history) + 1))
    # a model that has not started waits half the budget: the tool warm start that learned to copy at 1,100
    step, _ = first_stop(lambda s: 0.0 if s < 1100 else 0.95, low=0.9)
    assert step is None
    step, reason = first_stop(lambda s: 0.01)
    assert step == 1500 and "below a quarter of the target" in reason


class Killed(Exception):
    """What a kill does to the build: it stops, mid-way."""


def killed_at(step: int, lines: list):
    def log(line: str) -> None:
        if line.startswith(f"warm start: step {step}/"):
            raise Killed(line)
        lines.append(line)

    return log


# 10 of 20 steps at 0% of a 100% target: the warm start gives up at step 10 (half of max_steps, not started)
WARM = dict(target_accuracy=[1.0, 1.0], max_steps=20, batch_size=4, lr=1e-3, eval_every=2, eval_rows=4,
            max_new_tokens=4)


def test_a_killed_warm_start_resumes_from_its_last_check_and_ends_as_the_uninterrupted_one(tiny_lm, arith_env,
                                                                                           tmp_path):
    whole = tiny_lm.model()
    expected = warm_start(whole, tiny_lm.tokenizer, arith_env, seed=0, log=lambda *_: None, **WARM)
    checkpoint, lines = tmp_path / "partial.pt", []
    with pytest.raises(Killed):
        warm_start(tiny_lm.model(), tiny_lm.tokenizer, arith_env, seed=0, log=killed_at(6, lines),
                   checkpoint=checkpoint, **WARM)
    assert checkpoint.exists() and not checkpoint.with_name("partial.pt.tmp").exists()
    lines = []
    resumed = tiny_lm.model()
    report = warm_start(resumed, tiny_lm.tokenizer, arith_env, seed=0, log=lines.append, checkpoint=checkpoint, **WARM)
    assert lines[0].startswith("warm start: resuming after step 4 of 20"), lines[0]
    assert lines[1].startswith("warm start: step 6/20 "), lines[1]  # not step 2: the first 4 steps are not redone
    assert report["resumed_at"] == [4] and report["steps"] == expected["steps"] == 10
    assert report["history"] == expected["history"] and report["outcome"] == expected["outcome"] == "gave_up"
    for name, tensor in whole.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name


def test_a_killed_build_leaves_no_entry_resumes_and_its_entry_says_it_gave_up(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    env_config = {"name": "arithmetic", "digits": 1, "ops": ["+"]}
    env = load_env(**env_config)
    arch = dict(vocab_size=512, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                max_positions=128)
    path = tiny_model_path(env, env_config, arch, WARM, 0)
    partial = path.with_name(path.name + ".partial.pt")
    with pytest.raises(Killed):
        build_tiny(env, env_config, arch, WARM, seed=0, log=killed_at(8, []))
    assert not path.exists() and not path.with_name(path.name + ".tmp").exists() and partial.exists()

    lines = []
    assert build_tiny(env, env_config, arch, WARM, seed=0, log=lines.append) == path
    assert any(line.startswith("warm start: resuming after step 6 of 20") for line in lines), lines
    assert not partial.exists()
    report = json.loads((path / "warm_start.json").read_text())
    assert report["outcome"] == "gave_up" and report["steps"] == 10 and report["resumed_at"] == [6]
    assert lines[-1].startswith(f"tiny model: cached at {path} with its warm start's outcome (gave_up")

    lines = []  # reused: the model is the one that gave up, and the log says so
    build_tiny(env, env_config, arch, WARM, seed=0, log=lines.append)
    assert lines[0] == f"tiny model: cached at {path}"
    assert lines[-1].startswith(f"WARNING: tiny model: the cached model at {path} did not reach its warm start's "
                                f"target 100%"), lines[-1]
    assert "RL starts from it" in lines[-1] and "gave up at step 10" in lines[-1]

    report["outcome"] = "reached"  # a model that met its target is reused without a word
    (path / "warm_start.json").write_text(json.dumps(report))
    assert tiny_model.short_of_target(path, reused=True) is None
