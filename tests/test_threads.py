"""`threads=auto` follows the model's size; a bad value is one line naming the key (trainer/threads.py)."""

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
    line = threads.set_model_threads("auto", torch.nn.Linear(100, 100))
    assert torch.get_num_threads() == 1
    assert line.startswith("threads: 1 (threads=auto: 0.0M parameters; one thread under 10M")


def test_auto_gives_a_model_from_10m_parameters_torchs_default(restore_threads, monkeypatch):
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 3)  # torch's own count when rlvr was imported
    torch.set_num_threads(1)
    with torch.device("meta"):  # 10,000 x 1,000 = exactly the line, without the memory
        model = torch.nn.Embedding(10_000, 1_000)
    line = threads.set_model_threads("auto", model)
    assert torch.get_num_threads() == 3
    assert line.startswith("threads: 3 (threads=auto: 10.0M parameters; every core from 10M")


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
    assert threads.set_model_threads(value, large) is None
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
