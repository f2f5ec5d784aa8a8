"""`rlvr envs new NAME --multi-turn` without installing: the written env is a MultiTurnEnv and the package's own
tests pass when imported from the written folder, the env built from its class instead of its entry point
(the installed round trip, listing and training are
tests/rlvr/test_plugin_roundtrip.py's, marked slow)."""

from __future__ import annotations

import importlib
import sys

import pytest

from rlvr.envs.multi_turn import MultiTurnEnv
from rlvr.envs.scaffold import main, scaffold


def test_the_multi_turn_scaffold_is_a_working_multi_turn_env(tmp_path, monkeypatch):
    root = scaffold("count_up_demo", tmp_path / "pkg", multi_turn=True)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.syspath_prepend(str(root / "tests"))
    try:
        env = importlib.import_module("rlvr_env_count_up_demo").load_env()
        assert isinstance(env, MultiTurnEnv) and env.max_turns == 3
        generated = importlib.import_module("test_count_up_demo")
        # not installed, so no entry point: the generated test's load_env(name, **yaml) builds the class directly
        monkeypatch.setattr(generated, "load_env", lambda name, **config: type(env)(**config))
        generated.test_a_game_played_right_scores_one_and_a_wrong_total_ends_it()
        generated.test_train_and_test_never_share_a_problem()
    finally:
        for name in [m for m in sys.modules if m.startswith(("rlvr_env_count_up_demo", "test_count_up_demo"))]:
            del sys.modules[name]


def test_the_one_turn_scaffold_is_unchanged_and_a_taken_name_is_refused(tmp_path, capsys):
    root = scaffold("one_turn_demo", tmp_path / "one")
    assert "class OneTurnDemoEnv(Env)" in (root / "rlvr_env_one_turn_demo" / "env.py").read_text()
    assert main(["guess_number", "--multi-turn", "--dir", str(tmp_path / "x")]) == 2
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not empty"):
        scaffold("other_demo", root, multi_turn=True)
