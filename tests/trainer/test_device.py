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


@pytest.mark.parametrize("avx512_bf16,amx,expected", [(False, False, "none"), (True, False, "bf16"),
                                                      (False, True, "bf16")])
def test_autocast_auto_follows_the_cpus_bf16_units(monkeypatch, avx512_bf16, amx, expected):
    """model.autocast=auto: bf16 where the CPU has AVX512-BF16 or AMX (a Xeon from Sapphire Rapids), none where
    bf16 would be emulated (slower than float32); the start log's line says which."""
    from omegaconf import OmegaConf

    from rlvr.trainer.device import resolve_autocast

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    model_cfg = OmegaConf.create({"autocast": "auto"})
    line = resolve_autocast(model_cfg, torch.device("cpu"))
    assert model_cfg.autocast == expected
    assert line == f"model.autocast=auto -> {expected} (cpu {'has' if expected == 'bf16' else 'lacks'} bf16 units)"
    for setting in ("none", "bf16"):  # a setting the user chose stays, with nothing to log
        chosen = OmegaConf.create({"autocast": setting})
        assert resolve_autocast(chosen, torch.device("cpu")) is None and chosen.autocast == setting


def test_autocast_auto_on_a_gpu_asks_cuda(monkeypatch):
    from omegaconf import OmegaConf

    from rlvr.trainer.device import resolve_autocast

    for supported, expected in ((True, "bf16"), (False, "none")):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda supported=supported: supported)
        model_cfg = OmegaConf.create({"autocast": "auto"})
        resolve_autocast(model_cfg, torch.device("cuda", 0))
        assert model_cfg.autocast == expected


def test_a_run_with_autocast_auto_trains_as_this_cpu_decides(tiny_lm, tmp_path):
    """`rlvr train model.autocast=auto` on this machine: the policy carries the bf16 hooks exactly when this CPU
    has bf16 units, the start log says so, and config.yaml records what was used."""
    from omegaconf import OmegaConf

    from rlvr.api import train_config
    from rlvr.trainer.device import has_bf16_units
    from rlvr.trainer.setup import build_run
    from tests.cli_run import tiny_train

    cfg = train_config(tiny_train(tiny_lm, "model.autocast=auto", f"output_dir={tmp_path / 'run'}")[1:])
    lines = []
    run = build_run(cfg, log=lambda *args, **_: lines.append(" ".join(map(str, args))))
    try:
        expected = "bf16" if has_bf16_units(torch.device("cpu")) else "none"
        assert f"model.autocast=auto -> {expected} (cpu " in "\n".join(lines)
        assert hasattr(run.ctx.model, "_autocast_device") == (expected == "bf16")
        assert OmegaConf.load(tmp_path / "run" / "config.yaml").model.autocast == expected
    finally:
        run.env.shutdown()
        run.ctx.engine.shutdown()
        run.parallel.close()
        run.files.close()
