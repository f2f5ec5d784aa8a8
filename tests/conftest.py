"""Shared fixtures: a tiny randomly initialised Qwen2 model with a locally trained tokenizer.

Nothing is downloaded and nothing touches the user's model cache: `RLVR_CACHE` points at a
temporary directory for the whole session.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class TinyLM:
    """`path` holds the saved model and tokenizer (Hugging Face format); `model()` is a fresh copy."""

    path: Path
    tokenizer: object
    _model: object

    def model(self):
        return copy.deepcopy(self._model)


@pytest.fixture(scope="session", autouse=True)
def _private_rlvr_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLVR_CACHE", str(tmp_path_factory.mktemp("rlvr_cache")))
        yield


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> TinyLM:
    from rlvr.envs import load_env
    from rlvr.trainer.tiny_model import build_model, tokenizer_corpus, train_tokenizer

    env = load_env("arithmetic", digits=1, ops=["+"])
    tokenizer = train_tokenizer(tokenizer_corpus(env, 500, 0), 512)
    model = build_model(tokenizer, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1,
                        intermediate_size=64, max_positions=128, seed=0)
    model.train()
    path = tmp_path_factory.mktemp("tiny_lm")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return TinyLM(path, tokenizer, model)
