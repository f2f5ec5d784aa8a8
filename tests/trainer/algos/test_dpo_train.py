"""`rlvr train algo=dpo` end to end: offline from a scored-completions file, and online from the warm start.

(a) Offline: a completions.jsonl shaped as `rlvr eval` writes it, for 16 one-digit additions with three
    completions each (right answer, wrong answer, no answer tags; rewards from the env's own verifiers:
    1.0, 0.1, 0.0) plus 4 prompts whose two completions are the same right text (deduplicated, so no pair).
    DPO on tests/conftest.py's supervised tiny model must widen the margin between chosen and rejected.
(b) Online: one round trains every parameter, and micro-batches agree with one batch. That online DPO
    from its preset raises held-out accuracy is tests/trainer/algos/test_algorithms_learn.py's `dpo` case, with a margin
    from the spread over five seeds (bench/bench_seeds.py) on 2-digit addition. The 1-digit held-out test
    that stood here failed on a fresh cache: with 1-digit addition (80 training and 20-23 test problems)
    every algorithm's greedy test accuracy fell in 60-80 steps from seed 0's warm start (45% -> 10-35%,
    dpo 45% -> 25%) while the training reward held or rose, too few problems to generalise from.
"""

import json
import os
import subprocess
import sys

import pytest

from rlvr.trainer.algos.dpo_data import read_scored_completions
from rlvr.errors import ConfigError

ENV = ["env.digits=1", "env.ops=[+]"]


def _run(directory, overrides, cache=None):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if cache is not None:
        env["RLVR_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-m", "rlvr", "train", *overrides, "output_dir=run"], cwd=directory,
                          env=env, capture_output=True, text=True)


def _history(directory):
    return [json.loads(line) for line in (directory / "run" / "metrics.jsonl").read_text().splitlines()]


def _scored_records(n_prompts=16, n_tied=4):
    from rlvr.envs import load_env

    env = load_env("arithmetic", digits=1, ops=["+"])
    rows = list({row["id"]: row for row in env.rows("train", 80, seed=0)}.values())[: n_prompts + n_tied]  # distinct
    assert len(rows) == n_prompts + n_tied
    records = []
    for i, row in enumerate(rows):
        answer = int(row["answer"])
        texts = ([f"<think></think><answer>{answer}</answer>"] * 2 if i >= n_prompts else
                 [f"<think></think><answer>{answer}</answer>", f"<think></think><answer>{answer + 1}</answer>",
                  str(answer)])
        for sample, (text, result) in enumerate(zip(texts, env.score(texts, [row] * len(texts)))):
            records.append({"model": "m", "env": "arithmetic", "prompt_id": row["id"], "sample": sample,
                            "messages": env.messages(row), "answer": row["answer"], "completion": text,
                            **result.to_dict(), "truncated": False})
    return records


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_offline_dpo_widens_the_margin(tmp_path, tiny_lm_sft):
    records = _scored_records()
    assert sorted({r["reward"] for r in records}) == pytest.approx([0.0, 0.1, 1.0])  # the env scored them
    data = _write(tmp_path / "completions.jsonl", records)
    result = _run(tmp_path, ["algo=dpo", f"data={data}", f"model.name_or_path={tiny_lm_sft.path}", "rollout=hf",
                             *ENV, "train.steps=12", "algo.pairs_per_step=16", "optim.lr=1e-3", "train.eval_prompts=4",
                             "train.eval_every=1000", "train.save_every=1000", "threads=1"])
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [m for m in _history(tmp_path) if "loss" in m]
    assert [m["step"] for m in steps] == list(range(1, 13))
    # 16 prompts x 3 pairs (1.0 > 0.1, 1.0 > 0.0, 0.1 > 0.0) = 48 pairs; the 4 tied prompts give none: 4 / 20
    first = steps[0]
    assert first["pairs/count"] == 48 and first["pairs/no_pair_frac"] == pytest.approx(0.2)
    assert first["pairs/per_prompt"] == pytest.approx(48 / 20)
    # 48 pairs, 16 a step: 3 steps an epoch, step 12 ends the 4th
    assert steps[-1]["data/epoch"] == pytest.approx(4.0) and steps[0]["data/epoch"] == pytest.approx(1 / 3)
    # step 1 runs before any update: the policy is the reference, so every implicit reward is 0 and loss log 2
    assert first["rewards/margin"] == pytest.approx(0.0, abs=1e-5)
    assert first["loss"] == pytest.approx(0.693147, abs=1e-4)
    last = steps[-3:]
    margin = sum(m["rewards/margin"] for m in last) / 3
    accuracy = sum(m["rewards/accuracy"] for m in last) / 3
    report = f"margin {first['rewards/margin']:.3f} -> {margin:.3f}, accuracy -> {accuracy:.2f}"
    print(report)
    assert margin > 0.3, report
    assert accuracy > 0.8, report
    assert "reward/mean" not in steps[-1]  # nothing was sampled
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(), parse_constant=pytest.fail)  # no NaN
    assert summary["steps"] == 12 and summary["after"]["train_reward_last_10"] is None
    assert "train reward" not in result.stdout and "| held-out greedy accuracy |" in result.stdout
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert samples and samples[0]["chosen"]["reward"] > samples[0]["rejected"]["reward"]


@pytest.mark.parametrize("per_step, size", [(16, 48), (20, 48), (100, 48), (1, 3)])
def test_offline_batches_cover_each_epoch_once_without_repeats(per_step, size):
    from rlvr.trainer.algos.dpo_offline import offline_batch

    batches_per_epoch = -(-size // min(per_step, size))
    for epoch in range(2):
        batches = [offline_batch(7, epoch * batches_per_epoch + i + 1, per_step, size) for i in range(batches_per_epoch)]
        seen = [index for picked, _ in batches for index in picked]
        assert sorted(seen) == list(range(size)), "each pair once per epoch, no pair twice in a batch"
        assert all(len(picked) <= per_step for picked, _ in batches)
        assert batches[-1][1] == pytest.approx(epoch + 1)  # epochs completed after the epoch's last batch
    assert offline_batch(7, 1, per_step, size)[0] != offline_batch(7, batches_per_epoch + 1, per_step, size)[0] \
        or size == 1, "each epoch is shuffled anew"


def test_malformed_line_is_refused_naming_it(tmp_path, tiny_lm_sft):
    records = _scored_records(4, 0)
    del records[2]["reward"]
    data = _write(tmp_path / "bad.jsonl", records)
    result = _run(tmp_path, ["algo=dpo", f"data={data}", f"model.name_or_path={tiny_lm_sft.path}", *ENV])
    assert result.returncode != 0
    assert f"data={data} line 3: field 'reward' is missing" in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # refused before anything ran


@pytest.mark.parametrize("line,expected", [
    ("not json", "line 2: not valid JSON"),
    ('{"prompt_id": 1, "prompt": "1+1=", "completion": "2", "reward": "high"}', "line 2: field 'reward' must be"),
    ('{"prompt_id": 1, "prompt": "1+1=", "completion": "2", "reward": true}', "line 2: field 'reward' must be"),
    ('{"prompt_id": 1, "completion": "2", "reward": 1}', "line 2: field 'messages' (or 'prompt') is missing"),
    ('{"prompt": "1+1=", "completion": "2", "reward": 1}', "line 2: field 'prompt_id' is missing"),
    ('{"prompt_id": 1, "prompt": "2+2=", "completion": "4", "reward": 1}', "line 2: prompt_id 1 has different"),
    ('{"prompt_id": 1, "prompt": "1+1=", "completion": 2, "reward": 1}', "line 2: field 'completion' must be str"),
    ('{"prompt_id": 1, "prompt": "1+1=", "completion": "2", "reward": NaN}', "line 2: field 'reward' is nan"),
    ('[1, 2]', "line 2: expected a JSON object"),
])
def test_bad_records_name_line_and_field(tmp_path, line, expected):
    path = tmp_path / "data.jsonl"
    path.write_text('{"prompt_id": 1, "prompt": "1+1=", "completion": "3", "reward": 0}\n' + line + "\n")
    with pytest.raises(ConfigError) as error:
        read_scored_completions(path)
    assert f"data={path} {expected}" in str(error.value)


def test_records_group_by_env_and_prompt_id(tmp_path):
    lines = [
        {"prompt_id": 1, "prompt": "1+1=", "completion": "2", "reward": 1},
        {"env": "other", "prompt_id": 1, "messages": [{"role": "user", "content": "x"}], "completion": "y",
         "reward": 0.5, "truncated": True},
        {"prompt_id": 1, "prompt": "1+1=", "completion": "3", "reward": 0},
    ]
    path = _write(tmp_path / "data.jsonl", lines)
    prompts, completions = read_scored_completions(path)
    assert prompts == [[{"role": "user", "content": "1+1="}], [{"role": "user", "content": "x"}]]
    assert completions == [[("2", 1.0, False), ("3", 0.0, False)], [("y", 0.5, True)]]


def test_config_errors_name_the_key(compose_train, tmp_path):
    from rlvr.trainer.validate import validate_train_config

    cases = [
        (["algo=dpo", "algo.beta=0"], "algo.beta=0.0"),
        (["algo=dpo", "algo.loss_type=hinge"], "algo.loss_type='hinge'"),
        (["algo=dpo", "algo.label_smoothing=0.5"], "algo.label_smoothing=0.5"),
        (["algo=dpo", "algo.loss_type=ipo", "algo.label_smoothing=0.1"], "algo.label_smoothing=0.1 (cDPO)"),
        (["algo=dpo", "algo.pair_strategy=random"], "algo.pair_strategy='random'"),
        (["algo=dpo", "algo.dpo_updates_per_round=0"], "algo.dpo_updates_per_round=0"),
        (["algo=dpo", "train.completions_per_prompt=1"], "train.completions_per_prompt=1"),
        (["algo=dpo", f"data={tmp_path}/missing.jsonl"], "missing.jsonl: no such file"),
        (["algo=grpo", f"data={tmp_path}/x.jsonl"], "is read only by algo=dpo"),
    ]
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            validate_train_config(compose_train(overrides))
    cfg = compose_train(["algo=dpo"])
    validate_train_config(cfg)
    assert (cfg.algo.beta, cfg.algo.loss_type, cfg.algo.pair_strategy) == (0.1, "sigmoid", "all")


def test_online_step_changes_every_parameter_and_micro_batches_agree(tiny_lm_sft, compose_train):
    """One online round on a group with reward variance (completions score 0, 1, 0, 1, ... as in
    tests/trainer/test_trainer_step.py) trains every parameter; micro-batches of 1 pair x accumulation give the
    same update as the whole round's pairs in one micro-batch (the loss is divided by the round's pairs)."""
    import math

    import torch

    from rlvr.trainer.algos.table import ALGORITHMS
    from rlvr.trainer.step import train_step
    from rlvr.trainer.rollout.types import SamplingParams
    from rlvr.trainer.rollout.hf import HFEngine
    from rlvr.trainer.context import RunContext
    from tests.trainer.test_trainer_step import AlternatingRewardEnv

    def one_step(micro_batch_size):
        cfg = compose_train(["algo=dpo", "env.digits=1", "train.prompts_per_step=2", "train.completions_per_prompt=4",
                             f"train.micro_batch_size={micro_batch_size}", "rollout.max_new_tokens=12", "optim.lr=1e-2"])
        model = tiny_lm_sft.model()
        reference = tiny_lm_sft.model().eval().requires_grad_(False)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        sampling = SamplingParams(n=4, max_new_tokens=12)
        ctx = RunContext(cfg, AlternatingRewardEnv(digits=1, ops=["+"]), tiny_lm_sft.tokenizer, model, reference,
                         HFEngine(model, tiny_lm_sft.tokenizer), sampling, optimizer, scheduler)
        torch.manual_seed(0)
        metrics, samples = train_step(ctx, 1, ALGORITHMS["dpo"])
        return model, metrics, samples

    before = dict(tiny_lm_sft.model().named_parameters())
    model, metrics, samples = one_step(64)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n].detach())]
    assert len(changed) == len(before), f"unchanged: {sorted(set(before) - set(changed))}"
    # 2 prompts x 4 completions scored 0, 1, 0, 1: 2 chosen x 2 rejected = 4 pairs each (unless texts repeat)
    assert metrics["pairs/count"] >= 2 and metrics["pairs/no_pair_frac"] == 0.0
    assert metrics["loss"] == pytest.approx(math.log(2), abs=1e-5)  # policy == reference before the update
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()), metrics
    assert samples
    micro_model, micro_metrics, _ = one_step(2)  # one pair per micro-batch
    assert micro_metrics["pairs/count"] == metrics["pairs/count"]
    for (name, p), q in zip(model.named_parameters(), micro_model.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name

