"""TRL's GRPOTrainer quick start, ported to rlvr in docs/training/trl_quickstart/ (issue 51), runs for real: the
script as a user runs it (`python train_grpo.py model=hf model.name_or_path=DIR`, from its folder) trains two
steps on its JSONL with TRL's unique-characters reward and writes a checkpoint, with TRL's field names translated;
with TRL installed the same fields as a real `trl.GRPOConfig` train the same run. docs/training/from-trl.md shows
the script as it is in the folder, checked here so the page cannot drift from what runs."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "training" / "trl_quickstart"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The quick start's folder copied into tmp_path, as a user's working directory."""
    work = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, work, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(work)
    return work


def check_run(run_dir: Path) -> None:
    """Two steps of 2 prompts x 4 completions of <= 32 tokens, a checkpoint at step 2 that loads, and every sampled
    completion scored by TRL's reward, len(set(completion.lower())), kept when cut (as TRL scores it)."""
    from transformers import AutoModelForCausalLM

    cfg = OmegaConf.load(run_dir / "config.yaml")
    assert (cfg.train.steps, cfg.train.prompts_per_step, cfg.train.completions_per_prompt) == (2, 2, 4)
    assert cfg.rollout.max_new_tokens == 32 and cfg.optim.lr == 1e-5 and cfg.rollout.truncated_reward == "keep"
    assert cfg.env.reward == [{"verifier": "python", "weight": 1.0, "params": {"function": "my_rewards:reward_function"}}]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2]
    assert AutoModelForCausalLM.from_pretrained(run_dir / "checkpoints" / "step_2") is not None
    completions = [c for line in (run_dir / "samples.jsonl").read_text().splitlines()
                   for c in json.loads(line)["completions"]]
    assert len(completions) == 2 * 2 * 4  # 2 logged prompts x 4 completions, 2 steps
    for c in completions:
        assert c["reward"] == len(set(c["text"].lower())), c


def test_the_ported_quick_start_trains_two_steps_and_writes_a_checkpoint(folder, tiny_lm):
    done = subprocess.run([sys.executable, "train_grpo.py", "model=hf", f"model.name_or_path={tiny_lm.path}",
                           "model.kind=base", "threads=1"], cwd=folder, capture_output=True, text=True, timeout=900,
                          env=_env(folder))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"rlvr: checkpoint {folder / 'grpo-quickstart' / 'checkpoints' / 'step_2'}" in done.stdout
    check_run(folder / "grpo-quickstart")


def test_the_same_fields_as_a_real_grpo_config(folder, tiny_lm, monkeypatch):
    trl = pytest.importorskip("trl")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))  # the reward's worker processes import my_rewards
    sys.modules.pop("my_rewards", None)
    spec = importlib.util.spec_from_file_location("train_grpo", folder / "train_grpo.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = trl.GRPOConfig(**{**script.ARGS, "output_dir": str(folder / "with-grpo-config")}, use_cpu=True)
    run = script.main(["model=hf", f"model.name_or_path={tiny_lm.path}", "model.kind=base", "threads=1"], args=args)
    assert run.checkpoint == folder / "with-grpo-config" / "checkpoints" / "step_2"
    check_run(run.run_dir)


def test_from_trl_md_shows_the_script_and_reward_as_they_are():
    page = (ROOT / "docs" / "training" / "from-trl.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    for name in ("train_grpo.py", "my_rewards.py"):
        text = (QUICKSTART / name).read_text()
        code = text[text.index('"""', 3) + 3:].lstrip("\n")  # the file without its module docstring
        assert any(code in block for block in blocks), f"docs/training/from-trl.md does not show {name} as it is"


def _env(folder: Path) -> dict:
    import os

    return {**os.environ, "RLVR_CACHE": str(folder / "cache")}  # my_rewards is found in the working directory
