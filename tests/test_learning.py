"""A short CPU run of `rlvr train` raises the mean training reward on one-digit addition.

The default tiny model (0.84M parameters) is warm-started until validation accuracy reaches 30%
(about 80-100 supervised steps), then trained with GRPO for 200 steps (8 prompts x 8 completions,
lr 3e-4). Measured on 2 shared CPU cores, about 90 s in all:

    seed  model cache  train reward, first 10 -> last 10 steps   first 50 -> last 50 steps
    0     built        0.305 -> 0.490 (+0.185)                   0.320 -> 0.468 (+0.148)
    0     reused       0.310 -> 0.464 (+0.154)                   0.325 -> 0.499 (+0.174)
    1     built        0.247 -> 0.399 (+0.152)                   0.280 -> 0.393 (+0.113)

The test always builds the model in a fresh cache (first row). The "reused" row was measured
before runs were reseeded after the model build; the margin below holds for both. Held-out greedy accuracy on the 20-problem test split moved 20% -> 20%, 20% -> 30%
and 15% -> 25%: too coarse to assert on, so it is only checked to be logged.
"""

import json
import os
import subprocess
import sys

import pytest

MARGIN = 0.08
OVERRIDES = [
    "rollout=hf",  # tests/test_grpo_vllm.py runs the same with vLLM
    "env.digits=1", "model.warm_start.target_accuracy=[0.3,0.6]", "model.warm_start.lr=3e-3",
    "model.warm_start.eval_every=10", "model.warm_start.eval_rows=50", "train.steps=200", "train.eval_every=100",
    "train.eval_prompts=20", "rollout.max_new_tokens=10", "optim.lr=3e-4", "seed=0", "threads=1",
]


def _mean(values):
    return sum(values) / len(values)


@pytest.mark.slow
def test_grpo_raises_training_reward(tmp_path):
    env = {**os.environ, "RLVR_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "rlvr", "train", *OVERRIDES, "output_dir=run"], cwd=tmp_path,
                            env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    history = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rewards = [m["reward/mean"] for m in history if "reward/mean" in m]
    assert len(rewards) == 200

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    first, last = summary["before"]["train_reward_first_10"], summary["after"]["train_reward_last_10"]
    assert first == pytest.approx(_mean(rewards[:10])) and last == pytest.approx(_mean(rewards[-10:]))
    report = (f"train reward first 10 {first:.3f} -> last 10 {last:.3f}; first 50 {_mean(rewards[:50]):.3f} -> "
              f"last 50 {_mean(rewards[-50:]):.3f}; held-out accuracy {summary['before']['accuracy']:.2f} -> "
              f"{summary['after']['accuracy']:.2f}")
    print(report)
    assert last - first >= MARGIN, report
    assert _mean(rewards[-50:]) - _mean(rewards[:50]) >= MARGIN, report
    assert summary["before"]["step"] == 0 and summary["after"]["step"] == 200
    assert 0.0 < rewards[0] < 1.0, "the warm start should leave the model in between: some reward, not all"
