"""The before/after table's train-reward row (trainer/run.py `summarise`, `format_summary`): the first and last 10
steps, or the first and last halves of a run under 20 steps, never a window compared with itself."""

import pytest

from rlvr.trainer.run import format_summary, summarise


def history(steps: int) -> list[dict]:
    evals = {0: {"eval/accuracy": 0.1, "eval/reward_mean": 0.1, "eval/n": 4}}
    evals[steps] = {"eval/accuracy": 0.2, "eval/reward_mean": 0.2, "eval/n": 4}
    return [{"step": 0, **evals[0]}] + [{"step": s, "reward/mean": float(s), **evals.get(s, {})}
                                        for s in range(1, steps + 1)]


def test_a_short_run_compares_its_first_half_with_its_last():
    summary = summarise(history(6), 1.0, "run")
    assert summary["train_reward_window"] == 3
    assert summary["before"]["train_reward_first_10"] == pytest.approx(2.0)  # steps 1-3
    assert summary["after"]["train_reward_last_10"] == pytest.approx(5.0)  # steps 4-6
    assert "| train reward (first/last 3 steps' mean) | 2.000 | 5.000 | +3.000 |" in format_summary(summary)


def test_a_long_run_compares_ten_step_windows():
    summary = summarise(history(25), 1.0, "run")
    assert summary["train_reward_window"] == 10
    assert summary["before"]["train_reward_first_10"] == pytest.approx(5.5)  # steps 1-10
    assert summary["after"]["train_reward_last_10"] == pytest.approx(20.5)  # steps 16-25
    assert "| train reward (10-step mean) | 5.500 | 20.500 | +15.000 |" in format_summary(summary)


def test_one_step_has_no_window_to_compare():
    summary = summarise(history(1), 1.0, "run")
    assert summary["before"]["train_reward_first_10"] is None and summary["after"]["train_reward_last_10"] is None
    assert "train reward" not in format_summary(summary)
