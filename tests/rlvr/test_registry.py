"""The name registry: decorator, error messages, signature checks and entry-point plugins."""

import sys

import pytest

import rlvr.registry as registry_module
import rlvr.verifiers.registry as verifiers_registry
from rlvr.errors import ConfigError, UnknownNameError
from rlvr.registry import Registry
from rlvr.verifiers.registry import verifier_registry


class FakeDist:
    def __init__(self, name):
        self.name = name


class FakeEntryPoint:
    def __init__(self, name, factory, dist="my-plugin"):
        self.name, self._factory, self.dist = name, factory, FakeDist(dist)
        self.loads = 0

    def load(self):
        self.loads += 1
        return self._factory


def make():
    reg = Registry("env", "test.group", ())

    @reg.register("alpha")
    def alpha(size: int = 1, mode: str = "a"):
        return ("alpha", size, mode)

    @reg.register("beta")
    class Beta:
        def __init__(self, *, depth: int):
            self.depth = depth

    return reg


@pytest.fixture
def no_plugins(monkeypatch):
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [])


def test_decorator_and_build(no_plugins):
    reg = make()
    assert reg.names() == {"alpha": "built-in", "beta": "built-in"}
    assert reg.build("alpha", size=3) == ("alpha", 3, "a")
    assert reg.build("beta", depth=2).depth == 2


def test_unknown_name_lists_available(no_plugins):
    with pytest.raises(UnknownNameError, match=r"^unknown env 'gamma'; available: alpha, beta$"):
        make().get("gamma")
    assert issubclass(UnknownNameError, ValueError)


def test_bad_parameter_named(no_plugins):
    with pytest.raises(ConfigError, match=r"^env 'alpha' has no parameter 'sise' \(accepted: size, mode\)$"):
        make().build("alpha", sise=3)
    with pytest.raises(ConfigError, match=r"^env 'beta' needs parameter 'depth'$"):
        make().build("beta")


def test_var_kwargs_factory_skips_check(no_plugins):
    reg = make()
    reg.register("anything")(lambda **kw: kw)
    assert reg.build("anything", whatever=1) == {"whatever": 1}


def test_duplicate_registration_raises():
    reg = make()
    with pytest.raises(ValueError, match="env 'alpha' is already registered"):
        reg.register("alpha")(lambda: None)


def test_entry_point_plugin_loaded_lazily(monkeypatch):
    ep = FakeEntryPoint("gamma", lambda scale=1.0: ("gamma", scale))
    seen_groups = []
    monkeypatch.setattr(registry_module, "entry_points", lambda group: seen_groups.append(group) or [ep])
    reg = make()
    assert reg.names() == {"alpha": "built-in", "beta": "built-in", "gamma": "plugin my-plugin"}
    assert ep.loads == 0
    assert reg.build("gamma", scale=2.0) == ("gamma", 2.0)
    assert reg.build("gamma") == ("gamma", 1.0)
    assert ep.loads == 1
    assert set(seen_groups) == {"test.group"}
    with pytest.raises(ConfigError, match="env 'gamma' has no parameter 'scal'"):
        reg.build("gamma", scal=2.0)


def test_plugin_reusing_builtin_name_refused(monkeypatch):
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [FakeEntryPoint("alpha", object)])
    with pytest.raises(ValueError, match="plugin 'alpha' from my-plugin reuses a built-in name"):
        make().names()


def test_builtin_verifiers_listed():
    names = verifier_registry.names()
    assert {k: names[k] for k in ("format", "exact", "countdown")} == dict.fromkeys(("format", "exact", "countdown"), "built-in")


def test_env_registry_builtins():
    from rlvr.envs import load_env
    from rlvr.envs.registry import env_registry
    names = env_registry.names()
    assert names["arithmetic"] == names["countdown"] == "built-in"
    with pytest.raises(UnknownNameError, match=r"unknown env 'foo'; available: arithmetic, canary, code_feedback, code_stdio, countdown, dataset, gsm8k, guess_number, humaneval, math, reasoning_gym, tool_multiply"):
        load_env("foo")
    with pytest.raises(ConfigError, match=r"env 'arithmetic' has no parameter 'digitz' \(accepted: digits, ops, "):
        load_env("arithmetic", digitz=3)


def test_bare_import_refused(monkeypatch):
    import importlib.util
    import os
    # only the repository root on sys.path: no installed `verifiers` to hand over to (the test extras install one)
    monkeypatch.setattr(sys, "path", [os.path.dirname(os.path.dirname(verifiers_registry.__file__))])
    spec = importlib.util.spec_from_file_location("verifiers", verifiers_registry.__file__.replace("registry.py", "__init__.py"))
    with pytest.raises(ImportError, match="rlvr.verifiers"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
