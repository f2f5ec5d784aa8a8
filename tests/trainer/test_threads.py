"""`threads=auto` follows the model's size and the machine's load; a bad value is one line naming the key
(trainer/threads.py)."""

import os
import subprocess
import sys

import pytest
import torch
from rlvr.trainer import threads
from rlvr.trainer.validate import validate_train_config

from rlvr.errors import ConfigError
from tests.cli_run import tiny_train


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_auto_gives_a_model_under_10m_parameters_one_thread(restore_threads):
    torch.set_num_threads(2)
    chosen = threads.set_model_threads("auto", torch.nn.Linear(100, 100))
    assert torch.get_num_threads() == 1 and not chosen.follow
    assert chosen.line.startswith("threads: 1 (threads=auto: 0.0M parameters; one thread under 10M")


def large_model():
    with torch.device("meta"):  # 10,000 x 1,000 = exactly the line, without the memory
        return torch.nn.Embedding(10_000, 1_000)


def test_auto_gives_a_model_from_10m_parameters_every_free_core(restore_threads, monkeypatch):
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 3)  # torch's own count when rlvr was imported
    monkeypatch.setattr(threads, "_others_running", lambda reads, gap_s: 0)
    torch.set_num_threads(1)
    chosen = threads.set_model_threads("auto", large_model())
    assert torch.get_num_threads() == 3 and chosen.follow
    assert chosen.line.startswith("threads: 3 (threads=auto: 10.0M parameters; every free core from 10M: 3 cores, "
                                  "0 other running processes, looked at again before every step")


@pytest.mark.parametrize("others, expected", [(1, 2), (2, 1), (7, 1)])
def test_auto_leaves_the_cores_other_processes_run_on(restore_threads, monkeypatch, others, expected):
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 3)
    monkeypatch.setattr(threads, "_others_running", lambda reads, gap_s: others)
    chosen = threads.set_model_threads("auto", large_model())
    assert torch.get_num_threads() == expected
    assert f"threads: {expected} (" in chosen.line and f"{others} other running process" in chosen.line


def test_before_each_step_the_count_follows_the_load_and_says_so(restore_threads, monkeypatch):
    load = {"others": 0}
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 2)
    monkeypatch.setattr(threads, "_others_running", lambda reads, gap_s: load["others"])
    chosen = threads.set_model_threads("auto", large_model())
    assert torch.get_num_threads() == 2
    assert chosen.before_step() is None  # unchanged: nothing to say
    load["others"] = 1  # a test process starts beside the run
    assert chosen.before_step() == "threads: 2 -> 1 (threads=auto: 1 other running process on 2 cores)"
    assert torch.get_num_threads() == 1
    load["others"] = 0
    assert chosen.before_step() == "threads: 1 -> 2 (threads=auto: 0 other running processes on 2 cores)"


def test_where_the_load_is_not_this_machines_every_core_is_kept(restore_threads, monkeypatch):
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 2)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0})  # a mask: /proc/stat counts more CPUs
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    chosen = threads.set_model_threads("auto", large_model())
    assert torch.get_num_threads() == 2 and not chosen.follow
    assert "the load is not this process's to read: every core" in chosen.line
    assert chosen.before_step() is None


def test_beside_a_busy_process_per_core_auto_takes_one_thread(restore_threads):
    """Real processes, read from /proc/stat: one `while True: pass` per core leaves no core free, whatever else
    runs on the machine (more load only lowers the count further), so the choice is one thread."""
    cores = os.cpu_count()
    if len(os.sched_getaffinity(0)) != cores or threads.TORCH_DEFAULT != cores or cores < 2:
        pytest.skip("needs a process that sees every core of a machine with two or more")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        deadline = 200  # until the kernel counts them running: each is runnable from its first instruction
        while threads._others_running(5, 0.01) < cores and deadline:
            deadline -= 1
        chosen = threads.set_model_threads("auto", large_model())
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert torch.get_num_threads() == 1, chosen.line
    assert chosen.follow


def test_auto_builds_the_run_on_one_thread(restore_threads):
    torch.set_num_threads(2)
    threads.set_start_threads("auto")
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("value, expected", [(0, 2), (3, 3)])
def test_an_explicit_value_holds_whatever_the_model(restore_threads, value, expected):
    torch.set_num_threads(2)
    threads.set_start_threads(value)
    with torch.device("meta"):
        large = torch.nn.Embedding(10_000, 1_000)
    assert threads.set_model_threads(value, large) == threads.ModelThreads()
    assert torch.get_num_threads() == expected


@pytest.mark.parametrize("value", ["many", -1, 1.5, True, None])
def test_a_bad_value_names_the_key(compose_train, value):
    cfg = compose_train(["rollout=hf"])
    cfg.threads = value
    with pytest.raises(ConfigError, match=r"^threads=.*choose auto"):
        validate_train_config(cfg)


def test_the_start_up_log_names_the_choice(rlvr_cli, tiny_lm, restore_threads):
    code, output = rlvr_cli(*tiny_train(tiny_lm, "threads=auto", "train.steps=1", "output_dir=run"))
    assert code == 0, output
    assert "threads: 1 (threads=auto: " in output
    assert torch.get_num_threads() == 1
