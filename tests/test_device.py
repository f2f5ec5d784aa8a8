"""`train.device` (trainer/device.py): auto is the CPU on a machine without CUDA and the local rank's GPU on one with
it; a value that names no usable device stops the run at its start, naming the field."""

import pytest
import torch

from rlvr.errors import ConfigError
from rlvr.trainer.device import model_device, resolve_device


def test_auto_is_the_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")


def test_auto_on_this_machine_matches_what_torch_sees():
    expected = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    assert resolve_device("auto", local_rank=0) == expected


def test_auto_and_cuda_take_the_local_ranks_gpu(monkeypatch):
    """Under torchrun each rank trains on GPU LOCAL_RANK (a stand-in for a 2-GPU machine: only the count is read)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device("auto") == torch.device("cuda", 1)
    assert resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(ConfigError, match=r"train.device='cuda:2': this machine has 2 CUDA device\(s\)"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("value,match", [
    ("gpu", "train.device='gpu'; choose auto, cpu, cuda or cuda:N"),
    ("cuda:x", "train.device='cuda:x': the GPU index must be a number"),
])
def test_bad_values_name_the_field(value, match):
    with pytest.raises(ConfigError, match=match):
        resolve_device(value)


def test_cuda_without_cuda_is_refused_at_validation(compose_train, monkeypatch):
    from rlvr.trainer.validate import validate_train_config

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="train.device='cuda': CUDA is not available here"):
        validate_train_config(compose_train(["train.device=cuda"]))
    validate_train_config(compose_train(["train.device=cpu"]))


def test_model_device_of_a_module_without_parameters_is_its_device_attribute():
    assert model_device(torch.nn.Linear(2, 2)) == torch.device("cpu")

    class Holder(torch.nn.Module):
        device = torch.device("meta")

    assert model_device(Holder()) == torch.device("meta")
