"""bench/gpu_check.py, the script a GPU machine runs first, runs here on CPU at the tiny shape: every check
passes on this device (one of them a real `rlvr train` step on it), and each verdict comes with the numbers it was decided on.

The vllm check is its own negative control: it passes only if the engine, after `sync_weights`, disagrees
with the old weights by more than 10x the tolerance it agrees with the new ones (a sync that did nothing fails).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_passes_on_cpu_at_tiny_shape(tmp_path, require_vllm):
    results = tmp_path / "gpu_check.json"
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "gpu_check.py"), "--shape", "tiny", "--device", "cpu",
                           "--rows", "8", "--completion-tokens", "8", "--timeout-s", "240", "--out", str(results)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    checks = json.loads(results.read_text())["checks"]
    assert set(checks) == {"autocast", "grad_ckpt", "vllm", "ddp", "step", "train"}
    assert all(c["ok"] is True for c in checks.values()), checks
    assert checks["grad_ckpt"]["grad_rel_err"] <= 1e-4
    assert checks["autocast"]["grad_cosine"] >= 0.99
    vllm = checks["vllm"]
    assert vllm["max_logprob_diff"] <= 1e-3 and vllm["after_sync"] <= 1e-3 and vllm["vs_old_weights"] > 1e-2
    ddp = checks["ddp"]
    assert ddp["world"] == 2 and ddp["backend"] == "gloo" and ddp["ranks_equal"]
    assert ddp["max_diff_vs_one_process"] <= 1e-5
    assert checks["step"]["trained_tokens"] > 0
    train = checks["train"]  # a real `rlvr train` step with train.device=cpu, packed micro-batches
    assert train["trained_on"] == "cpu" and train["weights_moved"] > 0
    for line in ("PASS autocast", "PASS grad_ckpt", "PASS vllm", "PASS ddp", "PASS step", "PASS train",
                 "6 of 6 checks passed"):
        assert line in proc.stdout


def test_gpu_check_rejects_an_unknown_check():
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "gpu_check.py"), "--checks", "autocast,nccl"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--checks: unknown ['nccl']" in proc.stderr
