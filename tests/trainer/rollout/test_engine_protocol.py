"""Every rollout engine the factory names (trainer/rollout/factory.py ENGINES) implements the `Engine` protocol
(trainer/rollout/types.py), the interface file imports no engine, and the one weight path
(trainer/rollout/weights.py) hands the engine `weights(policy)`.

Each engine is checked from its source (ast), so the check runs where vLLM is not installed too."""

import pytest

import ast
import inspect
from pathlib import Path

import torch

from rlvr.trainer.models.lora import for_engine
from rlvr.trainer.rollout.factory import ENGINES, engine_class
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.rollout.types import Engine, Rollout, SamplingParams
from rlvr.trainer.rollout.weights import PolicyEngine

ROOT = Path(__file__).resolve().parents[3]
ROLLOUT = ROOT / "trainer" / "rollout"
METHODS = ("generate", "sync_weights", "shutdown")


def _protocol_parameters(name: str) -> list[str]:
    return list(inspect.signature(getattr(Engine, name)).parameters)


def _class_in_source(path: Path, name: str) -> ast.ClassDef:
    (cls,) = [n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef) and n.name == name]
    return cls


def test_hf_engine_and_the_policy_engine_are_engines(tiny_lm):
    hf = HFEngine(tiny_lm.model(), tiny_lm.tokenizer)
    assert isinstance(hf, Engine) and hf.copies_weights is False
    assert isinstance(PolicyEngine(hf, weights=lambda m: m), Engine)
    assert engine_class("hf") is HFEngine
    for name in METHODS:
        assert list(inspect.signature(getattr(HFEngine, name)).parameters) == _protocol_parameters(name), name


@pytest.mark.parametrize("kind", sorted(ENGINES))
def test_every_named_engine_has_the_protocol_members(kind):
    """Every method with the protocol's parameters, `copies_weights` a class attribute and `self.tokenizer`
    set in __init__; the vLLM and server engines copy the weights they sample from, HF generate does not."""
    entry = ENGINES[kind]
    # rlvr.trainer.rollout.hf -> trainer/rollout/hf.py
    path = ROOT / Path(*entry.module.split(".")[1:]).with_suffix(".py")
    cls = _class_in_source(path, entry.name)
    methods = {n.name: [a.arg for a in n.args.args] for n in cls.body if isinstance(n, ast.FunctionDef)}
    for method in METHODS:
        assert methods.get(method) == _protocol_parameters(method), (kind, method)
    flags = {t.id: n.value.value for n in cls.body if isinstance(n, ast.Assign) for t in n.targets}
    assert flags.get("copies_weights") is (kind != "hf"), kind
    (init,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    assigned = {t.attr for n in ast.walk(init) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Attribute)}
    assert "tokenizer" in assigned, kind


def test_the_server_engine_class_is_an_engine_without_vllm():
    """rollout=server's class imports without vLLM (the servers import it, not the trainer) and is an Engine."""
    server = engine_class("server")
    assert server.__name__ == "ServerEngine" and server.copies_weights is True
    for method in METHODS:
        assert list(inspect.signature(getattr(server, method)).parameters) == _protocol_parameters(method), method


def test_the_interface_imports_no_engine_and_the_engines_not_the_factory():
    def imports(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    engines = {entry.module for entry in ENGINES.values()} | {"rlvr.trainer.rollout.factory"}
    assert not imports(ROLLOUT / "types.py") & engines
    for entry in ENGINES.values():
        path = ROOT / Path(*entry.module.split(".")[1:]).with_suffix(".py")
        assert "rlvr.trainer.rollout.factory" not in imports(path), entry.module


class _Recording:
    tokenizer, copies_weights = None, True

    def __init__(self):
        self.synced, self.stopped = [], 0

    def generate(self, prompts, params):
        return Rollout([[1]] * len(prompts), [[2]] * len(prompts), list(prompts), [torch.zeros(1)] * len(prompts),
                       [False] * len(prompts))

    def sync_weights(self, model):
        self.synced.append(model)

    def shutdown(self):
        self.stopped += 1


def test_policy_engine_syncs_what_the_weights_function_returns():
    inner, policy, plain = _Recording(), torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    engine = PolicyEngine(inner, weights=lambda model: plain if model is policy else None)
    engine.sync_weights(policy)
    engine.shutdown()
    assert inner.synced == [plain] and inner.stopped == 1 and engine.copies_weights
    assert engine.generate(["a"], SamplingParams()).texts == ["a"]


def test_for_engine_hands_a_plain_model_through_unchanged():
    model = torch.nn.Linear(2, 2)  # no adapters: nothing to merge, whatever the engine
    assert for_engine(model, copies_weights=True) is model and for_engine(model, copies_weights=False) is model
