"""A run stopped from outside says so in its own words (issue 51): Ctrl-C prints only the two promised lines (the
python reward's worker processes neither take the terminal's SIGINT nor print a traceback), and SIGTERM, a
preempted job's signal, one line saying the run was stopped and where its last checkpoint is."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

HALF = """
def half(completions, **kwargs):
    return [0.5 for _ in completions]
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(HALF))
    return tmp_path


def interrupted_run(workdir, tiny_lm, sig: int) -> subprocess.CompletedProcess:
    """`rlvr train` with a python reward (its worker processes running), in a process group of its own as a shell
    starts a job; once step 1's checkpoint is saved, `sig` goes to the whole group as a terminal's Ctrl-C does
    (SIGINT), or to the trainer alone as a scheduler's preemption does (SIGTERM)."""
    env = {**os.environ, "RLVR_CACHE": str(workdir / "cache"), "PYTHONPATH": str(workdir)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr", "train", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1",
         'env.reward=[{verifier:python,params:{function:"my_rewards:half"}}]', "train.prompts_per_step=2",
         "train.completions_per_prompt=2", "train.eval_prompts=4", "train.steps=10000", "train.save_every=1",
         "train.eval_every=10000", "threads=1", "output_dir=run"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    checkpoint = workdir / "run" / "checkpoints" / "step_1" / "trainer_state.pt"
    give_up = time.monotonic() + 600  # a guard against a run that never saves, not a timing
    try:
        while not checkpoint.exists() and proc.poll() is None and time.monotonic() < give_up:
            time.sleep(0.2)
        time.sleep(1.0)  # into a later step, the reward's workers up
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=300)  # a guard against a hang, not a timing
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_ctrl_c_prints_the_two_promised_lines_and_no_worker_traceback(workdir, tiny_lm):
    done = interrupted_run(workdir, tiny_lm, signal.SIGINT)
    tail = done.stderr[done.stderr.rfind("rlvr train: interrupted"):]
    assert done.returncode == 1 and "Traceback" not in done.stderr and "KeyboardInterrupt\n" not in done.stderr, \
        done.stderr[-3000:]
    first, where = tail.strip().splitlines()
    assert "rlvr train: interrupted (KeyboardInterrupt); continue from step_" in first and \
        "with `rlvr train resume=run`" in first and where.startswith("  in "), done.stderr[-3000:]


def test_sigterm_says_the_run_was_stopped_and_where_its_last_checkpoint_is(workdir, tiny_lm):
    done = interrupted_run(workdir, tiny_lm, signal.SIGTERM)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rlvr train: stopped by SIGTERM; its last checkpoint is run/checkpoints/step_") and \
        "`rlvr train resume=run`" in last, done.stderr[-3000:]
    step = int(last.split("run/checkpoints/step_")[1].split(":")[0])
    assert (workdir / "run" / "checkpoints" / f"step_{step}" / "trainer_state.pt").exists()
