"""The difficulty curriculum (trainer/curriculum.py): the controller's moves derived by hand, its state across a
save and load, the ladders of countdown, arithmetic and reasoning-gym, train rows drawn at the level while the
test rows stay at the configured difficulty, bad levels refused by name, and a real `rlvr train` run whose resume
gives the uninterrupted run's level sequence."""

import json
import re

import pytest
from omegaconf import OmegaConf

from rlvr.envs import load_env
from rlvr.envs.base import Env
from rlvr.envs.split import is_test
from rlvr.errors import ConfigError
from rlvr.trainer.curriculum import DifficultyController, build_curriculum, target_positions
from rlvr.trainer.distributed import RankShardEnv
from rlvr.trainer.env_config import build_env
from rlvr.trainer.seeding import derive_seed


def test_controller_moves_by_window_mean_with_hysteresis():
    c = DifficultyController(num_levels=3, low=0.2, high=0.8, window=2)
    # (pass rate, move): the window must fill at a level before it moves; a move empties it
    steps = [(0.9, 0),   # window [0.9]: not full
             (0.9, +1),  # mean 0.9 > 0.8: level 0 -> 1, window emptied
             (1.0, 0),   # [1.0]: not full (one high step at the new level is not enough)
             (0.5, 0),   # mean 0.75: in band
             (0.9, 0),   # [0.5, 0.9] mean 0.7: in band
             (0.8, +1),  # [0.9, 0.8] mean 0.85 > 0.8: 1 -> 2
             (0.9, 0), (0.9, 0), (0.9, 0),  # top level: cannot move up, the window slides
             (0.1, 0),   # [0.9, 0.1] mean 0.5: in band
             (0.0, -1),  # [0.1, 0.0] mean 0.05 < 0.2: 2 -> 1
             (0.0, 0), (0.0, -1),  # 1 -> 0
             (0.0, 0), (0.0, 0)]   # bottom: stays
    levels = []
    for pass_rate, move in steps:
        assert c.observe(pass_rate) == move, (pass_rate, levels)
        levels.append(c.level)
    assert levels == [0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 0, 0, 0]


def test_controller_state_round_trip_continues_the_same_sequence():
    rates = [0.9, 0.85, 0.95, 0.7, 0.1, 0.05, 0.9, 0.9, 0.95, 0.3, 0.0, 0.1, 0.99, 0.9, 0.95, 0.85]
    whole = DifficultyController(5, 0.2, 0.8, 3)
    uninterrupted = [(whole.observe(r), whole.level) for r in rates]
    first = DifficultyController(5, 0.2, 0.8, 3)
    before = [(first.observe(r), first.level) for r in rates[:7]]  # stops with a part-filled window
    state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint holds, no shared objects
    second = DifficultyController(5, 0.2, 0.8, 3)
    second.load_state_dict(state)
    assert before + [(second.observe(r), second.level) for r in rates[7:]] == uninterrupted
    assert len({level for _, level in uninterrupted}) > 2, "the sequence should visit several levels"


def _cfg(env: dict, **curriculum):
    return OmegaConf.create({"env": env, "rollout": {"max_staleness": 0}, "data": None, "train": {"prompts_per_step": 8},
                             "curriculum": {"enabled": True, "levels": [], "band": [0.2, 0.8], "window": 4,
                                            "start_level": None, "target_share": 0.0, **curriculum}})


def _numbers(row) -> int:
    return len(row["numbers"])


def test_countdown_ladder_levels_draw_train_rows_and_keep_the_test_split():
    cfg = _cfg({"name": "countdown", "num_numbers": 3, "max_number": 20})
    env = build_env(cfg.env)
    # smaller numbers first (2/3 and 5/6 of max_number, rounded), the configured task, one number more
    assert env.difficulty_ladder() == [{"max_number": 13}, {"max_number": 17}, {"max_number": 20},
                                       {"num_numbers": 4, "max_number": 20}]
    assert build_env(OmegaConf.merge(cfg.env, {"max_number": 30})).difficulty_ladder()[:3] == [
        {"max_number": 20}, {"max_number": 25}, {"max_number": 30}]
    curriculum = build_curriculum(cfg, env, build_env)
    train_env = curriculum.env
    assert curriculum.level == 2  # start_level null: the configured task's level, so it moves only when it must
    assert train_env.rows("train", 64, seed=5) == env.rows("train", 64, seed=5)
    curriculum.controller.level = 0
    easy = train_env.rows("train", 64, seed=5)
    assert all(_numbers(r) == 3 and max(r["numbers"]) <= 13 for r in easy)
    assert max(max(r["numbers"]) for r in train_env.rows("test", 64, seed=5)) > 13  # the test rows: 1..20
    assert train_env.rows("test", 20, seed=5) == env.rows("test", 20, seed=5)  # the target difficulty
    curriculum.controller.level = 3
    hard = train_env.rows("train", 64, seed=5)
    assert all(_numbers(r) == 4 for r in hard) and max(max(r["numbers"]) for r in hard) > 13
    for row in easy + hard:  # no level draws a held-out problem (one hash for all levels)
        assert not is_test(row["id"].removeprefix("countdown/"), env.test_fraction)
    # a level's rows are scored by the configured environment's verifiers: each reference is correct
    assert [r.status.value for r in train_env.score([r["reference"] for r in easy[:8]], easy[:8])] == ["correct"] * 8
    assert train_env.rows("train", 8, seed=1) == build_env(OmegaConf.merge(cfg.env, {"num_numbers": 4})).rows(
        "train", 8, seed=1)
    with pytest.raises(ConfigError, match="'ops' must list distinct operators"):
        load_env("countdown", ops=["/"])



def test_target_positions_by_hand():
    # prompt i is a target prompt when floor((i + 1) x share) > floor(i x share)
    assert target_positions(8, 0.5) == [False, True] * 4  # floor(0.5 i): 0,0,1,1,2,2,3,3,4 -> up at i = 1, 3, 5, 7
    # share 0.3: floor(0.3 (i + 1)) for i = 0..7 is 0,0,0,1,1,1,2,2: it rises at i = 3 and 6; 2 = floor(2.4) prompts
    assert [i for i, t in enumerate(target_positions(8, 0.3)) if t] == [3, 6]
    assert sum(target_positions(100, 0.29)) == 29  # 0.29 x 100 is 28.999... in floating point
    assert sum(target_positions(3, 0.25)) == 0 and target_positions(4, 0.0) == [False] * 4  # floor(0.75) = 0
    assert target_positions(4, 0.75) == [False, True, True, True]  # floor(0.75 (i + 1)): 0, 1, 2, 3


def test_target_share_mixes_target_prompts_into_every_step_below_the_target():
    operators = [["+"], ["+", "-"], ["+", "-", "*"], ["+", "-", "*", "/"]]  # level 0: sums, level 3: the configured
    cfg = _cfg({"name": "countdown", "num_numbers": 3, "max_number": 20}, target_share=0.5,
               levels=[{"ops": ops} for ops in operators])
    env = build_env(cfg.env)
    curriculum = build_curriculum(cfg, env, build_env)
    train_env = curriculum.env
    assert curriculum.level == 3 and train_env.target_level == 3
    # at the target's own level every prompt is a target prompt: the very rows of the configured task
    assert train_env.rows("train", 8, seed=5) == env.rows("train", 8, seed=5)
    assert curriculum.observe({"status/correct": 0.1})["curriculum/target_frac"] == 1.0
    curriculum.controller.level = 0  # sums: 4 of 8 prompts (1, 3, 5, 7) from the target, 4 from the level
    rows = train_env.rows("train", 8, seed=5)
    assert rows[1::2] == env.rows("train", 4, seed=derive_seed("curriculum-target", 5))
    assert rows[0::2] == train_env.level_envs[0].rows("train", 4, seed=derive_seed("curriculum-level", 5))
    assert all(r["target"] == sum(r["numbers"]) for r in rows[0::2])
    assert sum(r["target"] == sum(r["numbers"]) for r in rows[1::2]) < 4  # the configured task: not all sums
    assert rows == train_env.rows("train", 8, seed=5) and rows != train_env.rows("train", 8, seed=6)
    assert train_env.rows("test", 20, seed=5) == env.rows("test", 20, seed=5)
    metrics = curriculum.observe({"status/correct": 0.5})
    assert metrics["curriculum/level"] == 0 and metrics["curriculum/target_frac"] == 0.5
    assert "4 of a step's 8 prompts come from the target task" in curriculum.describe()
    # two ranks of 4 prompts each: together the one-process draw, each with its 2 target prompts
    shards = [RankShardEnv(train_env, rank, 2).rows("train", 4, seed=5) for rank in (0, 1)]
    assert shards[0] + shards[1] == rows
    # a state from before the share (no key) or with another share is refused on resume, the same one is not
    state = curriculum.state_dict()
    assert state["target_share"] == 0.5
    curriculum.load_state_dict(state)
    with pytest.raises(ConfigError, match=r"curriculum.target_share=0.0 of its prompts .* this command 0.5"):
        curriculum.load_state_dict({**state, "target_share": 0.0})
    # no level is the configured task: below and above it alike, the share comes from the target
    cfg = _cfg({"name": "countdown"}, target_share=0.25, levels=[{"ops": ["+"]}, {"num_numbers": 4}])
    curriculum = build_curriculum(cfg, build_env(cfg.env), build_env)
    assert curriculum.env.target_level is None
    assert curriculum.observe({"status/correct": 0.5})["curriculum/target_frac"] == 0.25  # 2 of 8

def test_arithmetic_ladder_and_given_levels():
    cfg = _cfg({"name": "arithmetic", "digits": 2, "ops": ["+"]})
    env = build_env(cfg.env)
    assert env.difficulty_ladder() == [{"digits": 1}, {"digits": 2}, {"digits": 3}]
    cfg.curriculum.levels = [{"digits": 1, "ops": ["+"]}, {"digits": 1, "ops": ["+", "*"]}, {"digits": 2}]
    assert build_curriculum(cfg, env, build_env).level == 2  # {"digits": 2} leaves the configured task as it is
    cfg.curriculum.levels[2] = {"digits": 3}
    assert build_curriculum(cfg, env, build_env).level == 0  # no level is the configured task: the easiest
    cfg.curriculum.start_level = 1
    curriculum = build_curriculum(cfg, env, build_env)
    rows = curriculum.env.rows("train", 200, seed=0)
    assert {r["op"] for r in rows} == {"+", "*"} and max(max(r["a"], r["b"]) for r in rows) <= 9
    metrics = curriculum.observe({"status/correct": 0.5})
    assert metrics == {"curriculum/level": 1, "curriculum/pass_rate": 0.5, "curriculum/move": 0,
                       "curriculum/target_frac": 0.0}  # level 1 is not the configured task, no target_share
    assert curriculum.observe({})["curriculum/pass_rate"] == 0.0  # no completion correct: the status is absent


class _NoKnobs(Env):
    name = "no_knobs"
    default_reward = [{"verifier": "format"}]

    def rows(self, split, n, seed=0):
        return []


@pytest.mark.parametrize("change, message", [
    ({"levels": [{"prompt_template": "{numbers}{target}"}]}, r"levels\[0\]: 'prompt_template' is not a difficulty"),
    ({"levels": [{"num_numbers": 3}, {"num_numbers": 9}]}, r"levels\[1\] num_numbers=9: countdown: 'num_numbers'"),
    ({"levels": [{"num_numbers": 3}, {}]}, r"levels\[1\] must be a non-empty mapping"),
    ({"band": [0.8, 0.2]}, r"curriculum.band=\[0.8, 0.2\]"),
    ({"window": 0}, r"curriculum.window=0"),
    ({"start_level": 5}, r"curriculum.start_level=5 must be in 0..3"),
    ({"levels": [{"ops": ["+", "^"]}]}, r"levels\[0\] ops=\['\+', '\^'\]: countdown: 'ops' must list"),
    ({"target_share": 1.0}, r"curriculum.target_share=1.0 must be a number in \[0, 1\)"),
    ({"target_share": -0.1}, r"curriculum.target_share=-0.1 must be"),
    ({"target_share": True}, r"curriculum.target_share=True must be"),
])
def test_bad_curriculum_config_is_named(change, message):
    cfg = _cfg({"name": "countdown", "num_numbers": 3, "max_number": 20}, **change)
    with pytest.raises(ConfigError, match=message):
        build_curriculum(cfg, build_env(cfg.env), build_env)


def test_refused_where_it_cannot_steer():
    with pytest.raises(ConfigError, match="'no_knobs' has no difficulty parameters"):
        build_curriculum(_cfg({"name": "no_knobs"}), _NoKnobs(), build_env)
    cfg = _cfg({"name": "countdown"})
    cfg.rollout.max_staleness = 1
    with pytest.raises(ConfigError, match="rollout.max_staleness=1"):
        build_curriculum(cfg, build_env(cfg.env), build_env)
    off = _cfg({"name": "countdown"}, enabled=False)
    assert build_curriculum(off, build_env(off.env), build_env) is None


def test_reasoning_gym_ladder_from_its_curriculum():
    pytest.importorskip("reasoning_gym")
    env = load_env("reasoning_gym", task="leg_counting", pool_size=200)
    ladder = env.difficulty_ladder()
    assert len(ladder) > 3 and set(ladder[0]) == {"config"}
    maxima = [level["config"]["max_animals"] for level in ladder]
    assert maxima == sorted(maxima) and maxima[0] < maxima[-1]  # harder going up: more animals
    cfg = _cfg({"name": "reasoning_gym", "task": "leg_counting", "pool_size": 200}, start_level=0)
    curriculum = build_curriculum(cfg, env, build_env)
    rows = curriculum.env.rows("train", 20, seed=0)
    assert all(r["rg_entry"]["metadata"]["num_animals"] <= maxima[0] for r in rows)
    assert [r.reward for r in curriculum.env.score([r["reference"] for r in rows], rows)] == [1.0] * 20


def test_reasoning_gym_composite_with_weights_and_its_ladder():
    pytest.importorskip("reasoning_gym")
    config = {"datasets": [{"name": "leg_counting", "weight": 3, "config": {"max_animals": 3}},
                           {"name": "basic_arithmetic", "weight": 1, "config": {}}]}
    env = load_env("reasoning_gym", task="composite", config=config, pool_size=400)
    rows = env.rows("train", 400, seed=0)
    tasks = [r["rg_task"] for r in rows]
    assert set(tasks) == {"leg_counting", "basic_arithmetic"}
    assert 0.6 < tasks.count("leg_counting") / len(tasks) < 0.9  # weights 3:1
    assert all(r["rg_config"] == {"max_animals": 3} for r in rows if r["rg_task"] == "leg_counting")
    assert [r.reward for r in env.score([r["reference"] for r in rows[:30]], rows[:30])] == [1.0] * 30
    ladder = env.difficulty_ladder()
    legs = [level["config"]["datasets"][0]["config"]["max_animals"] for level in ladder]
    assert legs == sorted(legs) and legs[0] < legs[-1]
    assert all(level["config"]["datasets"][1]["weight"] == 1 for level in ladder)  # weights kept at every level
    cfg = _cfg({"name": "reasoning_gym", "task": "composite", "config": config, "pool_size": 100})
    assert len(build_curriculum(cfg, env, build_env).levels) == len(ladder)
    with pytest.raises(ConfigError, match=r"config.datasets\[1\]: 'weight' must be a number > 0"):
        load_env("reasoning_gym", task="composite",
                 config={"datasets": [{"name": "leg_counting", "weight": 1}, {"name": "gcd", "weight": 0}]})


# ---- a real run: the level sequence after a resume equals the uninterrupted run's --------------------------------

STEPS = 6


def _overrides(tiny_lm, *extra):
    return [f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env=arithmetic", "env.digits=1",
            "train.prompts_per_step=4", "train.completions_per_prompt=4", "train.eval_every=100",
            "train.eval_prompts=4", "threads=1", "curriculum.enabled=true", "curriculum.window=1",
            "curriculum.start_level=1", "curriculum.levels=[{digits:1},{digits:2}]",
            # a band no pass rate of 16 completions but exactly 0.5 sits in: the level moves whenever it can
            "curriculum.band=[0.5,0.5001]", *extra]


@pytest.mark.slow
@pytest.mark.parametrize("target_share", [0.0, 0.5])
def test_resume_gives_the_uninterrupted_level_sequence(tiny_lm_sft, tmp_path, compose_train, target_share):
    from rlvr.trainer.run import train

    quiet = lambda *_: None  # noqa: E731
    share = f"curriculum.target_share={target_share}"
    train(compose_train(_overrides(tiny_lm_sft, f"output_dir={tmp_path / 'A'}", f"train.steps={STEPS}", share)),
          log=quiet)
    train(compose_train(_overrides(tiny_lm_sft, f"output_dir={tmp_path / 'B'}", "train.steps=3", share)), log=quiet)
    train(compose_train(_overrides(tiny_lm_sft, f"output_dir={tmp_path / 'B'}", f"resume={tmp_path / 'B'}",
                                   f"train.steps={STEPS}", share)), log=quiet)

    def history(run):
        lines = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        return [(m["step"], m["curriculum/level"], m["curriculum/move"], m["curriculum/target_frac"], m["reward/mean"])
                for m in lines if "curriculum/level" in m]

    a, b = history("A"), history("B")
    assert [s for s, *_ in a] == list(range(1, STEPS + 1))
    assert a == b
    levels = [level for _, level, *_ in a]
    assert levels[0] == 1 and len(set(levels)) > 1, f"the band should move the level: {levels}"
    # the configured task (digits 1) is level 0: there every prompt is a target prompt; at level 1, target_share
    assert [frac for _, level, _, frac, _ in a] == [1.0 if level == 0 else target_share for level in levels]
    one_digit = lambda sample: re.fullmatch(r"\d\+\d=", sample["prompt"][-1]["content"])  # noqa: E731
    by_step: dict[int, list] = {}
    for line in (tmp_path / "A" / "samples.jsonl").read_text().splitlines():  # the step's first 2 prompts
        sample = json.loads(line)
        by_step.setdefault(sample["step"], []).append(sample)
    for step, samples in by_step.items():
        if levels[step - 1] == 0:  # level 0: one-digit prompts only
            assert all(one_digit(s) for s in samples), samples
        else:  # level 1: prompt 0 from the level (two digits); with share 0.5, prompt 1 from the target (one digit)
            assert [bool(one_digit(s)) for s in samples] == [False, target_share > 0], samples


def test_zero_variance_share_is_logged_for_every_run():
    import torch

    from rlvr.trainer.experience.metrics import reward_metrics
    from rlvr.verifiers.result import Status, VerifyResult

    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.1, 0.1, 0.1], [0.0, 0.1, 1.0]])  # [B=4, G=3]
    results = [VerifyResult(float(r), Status.CORRECT if r == 1 else Status.INCORRECT, {}) for r in rewards.flatten()]
    metrics = reward_metrics(rewards, results)
    assert metrics["reward/zero_var_frac"] == 0.5  # groups 0 (all 1) and 2 (all 0.1) of 4
    assert metrics["status/correct"] == 5 / 12  # the pass rate the curriculum reads: the mean of 3/3, 1/3, 0, 1/3
