"""Kill a run with SIGKILL after its step-2 checkpoint, resume it, and get bit-for-bit the
weights and the per-step metrics of a run that was never interrupted (docs/concepts/run-directory.md).

Run W builds the tiny model into a private cache; A (uninterrupted) and B (killed, then resumed)
both load it from there, so they start from the same weights and the same RNG state.
A and B also log to TensorBoard and (offline) W&B: after the resume each step is there once.
C, a copy of A cut back to its step-6 checkpoint, resumes with an empty model cache: it builds nothing."""

import glob
import json
import os
import shutil
import struct
import signal
import subprocess
import sys
import time
import warnings

import pytest
import torch
from safetensors.torch import load_file

# one worker runs this file: its module-scoped fixture is built once, not once per xdist worker
pytestmark = pytest.mark.xdist_group("resume")


STEPS = 12
OVERRIDES = [
    "rollout=hf",  # the HF engine: its sampling is seeded by torch's RNG, which the checkpoint restores
    "model.warm_start.max_steps=50", "model.warm_start.eval_every=50", "model.warm_start.eval_rows=20",
    "model.warm_start.lr=1e-2",  # enough for the answer format, so rewards vary and the weights move
    "model.arch.hidden_size=32", "model.arch.num_layers=2", "model.arch.num_heads=2", "model.arch.num_kv_heads=1",
    "model.arch.intermediate_size=64", "env.digits=1", f"train.steps={STEPS}", "train.save_every=2",
    "train.eval_every=3", "train.eval_prompts=10", "train.prompts_per_step=2", "train.completions_per_prompt=4",
    "threads=1",
]
LOGGERS = "logger=[tensorboard,wandb]"
SAME_EVERY_RUN = ("reward/mean", "reward/std", "loss", "grad_norm", "response_len/mean", "eval/accuracy")


def _command(*extra):
    return [sys.executable, "-m", "rlvr", "train", *OVERRIDES, *extra]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    env = {**os.environ, "RLVR_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}

    def run(*extra):
        result = subprocess.run(_command(*extra), cwd=root, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]

    run("output_dir=W")  # builds the cached tiny model
    run("output_dir=A", LOGGERS)
    process = subprocess.Popen(_command("output_dir=B", LOGGERS), cwd=root, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = root / "B" / "checkpoints" / "step_2" / "trainer_state.pt"
    while not marker.exists() and process.poll() is None:
        time.sleep(0.01)
    killed_mid_run = process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert marker.exists(), "run B exited before writing its step-2 checkpoint"
    if not killed_mid_run:
        warnings.warn("run B finished before the kill landed; the resume had nothing to redo")
    killed_at = max(int(p.name.removeprefix("step_")) for p in (root / "B" / "checkpoints").glob("step_*")
                    if p.name.removeprefix("step_").isdigit())
    print(f"run B killed {'mid-run' if killed_mid_run else 'after it finished'}, last checkpoint step_{killed_at}")
    run("output_dir=B", "resume=B", LOGGERS)
    return root, killed_mid_run, killed_at


def _metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_resumed_weights_equal_uninterrupted(runs):
    root, killed_mid_run, killed_at = runs
    assert killed_mid_run and killed_at < STEPS, f"the kill should land mid-run (last checkpoint: step {killed_at})"
    a = load_file(root / "A" / "checkpoints" / f"step_{STEPS}" / "model.safetensors")
    b = load_file(root / "B" / "checkpoints" / f"step_{STEPS}" / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    base = load_file(root / "A" / "checkpoints" / "step_2" / "model.safetensors")
    assert any(not torch.equal(base[name], a[name]) for name in a), "training never moved the weights"


@pytest.mark.slow
def test_resumed_metrics_have_each_step_once_and_match(runs):
    root, _, _ = runs
    a, b = _metrics(root / "A"), _metrics(root / "B")
    assert [m["step"] for m in b] == list(range(STEPS + 1))
    assert [m["step"] for m in a] == list(range(STEPS + 1))
    for ma, mb in zip(a, b):
        for key in SAME_EVERY_RUN:
            assert ma.get(key) == mb.get(key), (ma["step"], key)
    assert len({m["reward/mean"] for m in a[1:]}) > 1
    samples = [json.loads(line)["step"] for line in (root / "B" / "samples.jsonl").read_text().splitlines()]
    assert sorted(set(samples)) == list(range(1, STEPS + 1))
    assert all(samples.count(step) == samples.count(1) for step in set(samples))
    summary = json.loads((root / "B" / "summary.json").read_text())
    assert summary["steps"] == STEPS


@pytest.mark.slow
def test_same_samples_whether_or_not_the_model_was_cached(runs):
    root, _, _ = runs
    w, a = _metrics(root / "W"), _metrics(root / "A")
    assert [m.get("reward/mean") for m in w] == [m.get("reward/mean") for m in a]
    w_samples = (root / "W" / "samples.jsonl").read_text().splitlines()[0]
    a_samples = (root / "A" / "samples.jsonl").read_text().splitlines()[0]
    assert [c["text"] for c in json.loads(w_samples)["completions"]] == \
        [c["text"] for c in json.loads(a_samples)["completions"]]


def _tensorboard_scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))  # purges what a killed session logged past the resume
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


@pytest.mark.slow
def test_tensorboard_has_each_step_once_after_resume(runs):
    root, _, _ = runs
    expected = [(m["step"], m["reward/mean"]) for m in _metrics(root / "A") if "reward/mean" in m]
    for run_dir in ("A", "B"):
        logged = _tensorboard_scalars(root / run_dir, "reward/mean")
        assert [step for step, _ in logged] == list(range(1, STEPS + 1)), run_dir
        assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-6), run_dir
    accuracy = _tensorboard_scalars(root / "B", "eval/accuracy")
    assert [step for step, _ in accuracy] == [0, 3, 6, 9, 12]


def _wandb_history(path) -> list[dict]:
    """History rows of an offline W&B run file: a LevelDB-style log (32 KiB blocks of records with a
    7-byte header: crc32, length, type FULL=1/FIRST=2/MIDDLE=3/LAST=4) after a 7-byte ":W&B" header,
    each record a wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2

    raw, block, position, pending, rows = open(path, "rb").read(), 32768, 7, b"", []
    while position + 7 <= len(raw):
        left = block - position % block
        _, length, kind = struct.unpack("<IHB", raw[position:position + 7])
        if left < 7 or (length == 0 and kind == 0):  # block trailer / zero padding
            position += left
            continue
        pending += raw[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                             for item in record.history.item})
    return rows


@pytest.mark.slow
def test_wandb_offline_run_logs_every_step_and_resumes_the_same_run(runs):
    root, _, _ = runs
    files = glob.glob(str(root / "A" / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(files) == 1
    history = _wandb_history(files[0])
    assert [row["_step"] for row in history] == list(range(STEPS + 1))
    expected = {m["step"]: m["reward/mean"] for m in _metrics(root / "A") if "reward/mean" in m}
    assert {row["_step"]: row["reward/mean"] for row in history if "reward/mean" in row} == pytest.approx(expected)
    run_id = (root / "B" / "wandb_id").read_text().strip()
    sessions = sorted(glob.glob(str(root / "B" / "wandb" / "offline-run-*")))
    assert len(sessions) == 2 and all(s.endswith("-" + run_id) for s in sessions)  # killed session + resumed one


@pytest.mark.slow
def test_resume_with_an_empty_model_cache_builds_nothing_and_matches(runs, tmp_path):
    """A resume loads its policy and tokenizer from the checkpoint: a full fine-tune without a KL term never needs
    the base model, so an emptied RLVR_CACHE stays empty (no warm start: minutes at the tiny model's default size)
    and the run goes on bit for bit as the uninterrupted run A."""
    root, _, _ = runs
    run = tmp_path / "C"
    shutil.copytree(root / "A", run)  # run A as if killed after its step-6 checkpoint
    for path in (run / "checkpoints").iterdir():
        if int(path.name.removeprefix("step_")) > 6:
            shutil.rmtree(path)
    (run / "summary.json").unlink()
    cache = tmp_path / "empty_cache"
    cache.mkdir()
    env = {**os.environ, "RLVR_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "rlvr", "train", f"resume={run}", "logger=[]"], cwd=tmp_path,
                            env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming" in result.stdout and "from step_6" in result.stdout
    assert list(cache.iterdir()) == [], "the resume built a model into the cache"
    assert "tiny model" not in result.stdout and "warm start" not in result.stdout
    a = load_file(root / "A" / "checkpoints" / f"step_{STEPS}" / "model.safetensors")
    c = load_file(run / "checkpoints" / f"step_{STEPS}" / "model.safetensors")
    assert a.keys() == c.keys() and all(torch.equal(a[name], c[name]) for name in a)
    for ma, mc in zip(_metrics(root / "A"), _metrics(run), strict=True):
        assert all(ma.get(key) == mc.get(key) for key in SAME_EVERY_RUN), ma["step"]
