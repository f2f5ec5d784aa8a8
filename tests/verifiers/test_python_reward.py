"""verifier=python (verifiers/python/verifier.py): a reward function written for TRL's `GRPOTrainer(reward_funcs=...)`
works unchanged, returns exactly what calling it directly returns on the same inputs, composes with rlvr's
verifiers, and every way it can fail is one line: at build time for a bad path, per completion for a call."""

import json
import textwrap

import pytest

from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.verifiers.compose import build_reward
from rlvr.verifiers.registry import build_verifier
from rlvr.verifiers.result import Status

# Reward functions as TRL's documentation writes them (docs "GRPO Trainer", "Using a custom reward function"),
# plus the failures a user's function can have.
MY_REWARDS = '''
import asyncio
import re
import time


def reward_len(completions, **kwargs):
    return [-abs(20 - len(completion)) for completion in completions]


def format_reward_func(completions, **kwargs):
    """Reward function that checks if the completion has a specific format."""
    pattern = r"^<think>.*?</think><answer>.*?</answer>$"
    completion_contents = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, content) for content in completion_contents]
    return [1.0 if match else 0.0 for match in matches]


def contains_solution(prompts, completions, solution, **kwargs):
    return [float(s in c) if s else None for c, s in zip(completions, solution)]


def needs_no_kwargs(completions, solution):
    return [float(s in c) for c, s in zip(completions, solution)]


async def async_len(completions, **kwargs):
    await asyncio.sleep(0)
    return [len(c) for c in completions]


def raises(completions, **kwargs):
    return [1.0 / 0 for _ in completions]


def one_short(completions, **kwargs):
    return [1.0] * (len(completions) - 1)


def says_yes(completions, **kwargs):
    return "yes"


def sleeps(completions, **kwargs):
    time.sleep(600)


def wants_ids(completions, completion_ids, **kwargs):
    return [len(i) for i in completion_ids]


def raises_for_one(completions, **kwargs):
    if "poison" in completions:
        raise ValueError("cannot score poison")
    return [float(len(c)) for c in completions]


def worker_dies_for_one(completions, **kwargs):
    if "poison" in completions:
        import os
        os._exit(3)
    return [float(len(c)) for c in completions]


def raises_or_hangs(completions, **kwargs):
    if "poison" in completions:
        raise ValueError("cannot score poison")
    if "hang" in completions:
        time.sleep(600)
    return [1.0 for _ in completions]


def values_bad_for_one(completions, **kwargs):
    return [float("inf") if c == "poison" else "high" if c == "text" else float(len(c)) for c in completions]


NOT_A_FUNCTION = 3
'''


@pytest.fixture
def rewards_module(tmp_path, monkeypatch):
    """my_rewards.py in the working directory, where `module:function` paths are looked up."""
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(MY_REWARDS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    sys.modules.pop("my_rewards", None)
    importlib.invalidate_caches()
    return importlib.import_module("my_rewards")


@pytest.fixture
def python_reward():
    made = []

    def make(function, **params):
        made.append(build_verifier("python", function=function, **params))
        return made[-1]

    yield make
    for verifier in made:
        verifier.close()


def data_env(tmp_path, rows, **config):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_env("dataset", test_file=str(path), **config)


def test_trls_own_accuracy_reward_works_unchanged_and_matches_a_direct_call(tmp_path, rewards_module):
    """`trl.rewards.accuracy_reward` (conversational completions, a `solution` column, None for a gold it cannot
    parse) scores env=dataset rows exactly as calling it directly, the way GRPOTrainer does, scores them."""
    pytest.importorskip("math_verify")
    from trl.rewards import accuracy_reward

    rows = [{"prompt": [{"role": "user", "content": "What is 1/2 + 1/4?"}], "solution": "$\\frac{3}{4}$"},
            {"prompt": [{"role": "user", "content": "Name a colour."}], "solution": "blue, or any colour"}]
    env = data_env(tmp_path, rows, reward=[{"verifier": "python", "params": {"function": "trl.rewards:accuracy_reward"}}])
    by_solution = {r["columns"]["solution"]: r for r in env.rows("test", 2)}
    records = [by_solution[rows[0]["solution"]]] * 3 + [by_solution[rows[1]["solution"]]]
    texts = ["So \\boxed{\\frac{3}{4}}.", "\\boxed{0.75}", "\\boxed{\\frac{1}{3}}", "Blue."]
    results = env.score(texts, records)
    direct = accuracy_reward(prompts=[r["prompt"] for r in records],
                             completions=[[{"role": "assistant", "content": t}] for t in texts],
                             solution=[r["solution"] for r in (rows[0], rows[0], rows[0], rows[1])])
    assert direct == [1.0, 1.0, 0.0, None]
    assert [r.details["components"]["accuracy_reward"]["details"]["value"] for r in results] == direct
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 0.0]  # None: 0 in the sum, as TRL's nansum counts it
    assert [r.status for r in results] == [Status.CORRECT, Status.CORRECT, Status.INCORRECT, Status.INCORRECT]
    env.shutdown()


def test_trl_docs_functions_match_direct_calls_on_plain_and_chat_prompts(tmp_path, rewards_module, python_reward):
    plain = {"prompt": "Write a short sentence.", "solution": "cat", "columns": {"solution": "cat"}}
    chat = {"prompt": [{"role": "user", "content": "Write a short sentence."}], "columns": {"solution": "cat"}}
    texts = ["A cat sat.", "<think>hm</think><answer>cat</answer>", "", "A dog barked loudly at the cat today."]
    for name in ("reward_len", "contains_solution", "needs_no_kwargs", "async_len"):
        verifier = python_reward(f"my_rewards:{name}")
        got = [r.details["value"] for r in verifier.verify_batch(texts, [plain] * len(texts))]
        fn = getattr(rewards_module, name)
        direct = fn(prompts=[plain["prompt"]] * 4, completions=texts, solution=["cat"] * 4) \
            if name != "needs_no_kwargs" else fn(completions=texts, solution=["cat"] * 4)
        if name == "async_len":
            import asyncio

            direct = asyncio.run(direct)
        assert got == [float(x) for x in direct], name
    verifier = python_reward("my_rewards:format_reward_func")  # TRL's docs example reads completion[0]["content"]
    got = [r.details["value"] for r in verifier.verify_batch(texts, [chat] * len(texts))]
    assert got == rewards_module.format_reward_func([[{"role": "assistant", "content": t}] for t in texts]) == \
        [0.0, 1.0, 0.0, 0.0]


def test_a_record_without_columns_passes_its_own_fields(rewards_module, python_reward):
    """An `rlvr verify` line: its fields are the columns."""
    verifier = python_reward("my_rewards:contains_solution")
    result = verifier("the answer is 42", {"id": "a", "verifier": "python", "solution": "42"})
    assert (result.reward, result.status) == (1.0, Status.CORRECT)
    result = verifier("the answer is 42", {"solution": ""})
    assert (result.reward, result.status, result.details["value"]) == (0.0, Status.INCORRECT, None)


def test_composes_with_rlvr_verifiers_by_weight_and_names_components_after_functions(tmp_path, rewards_module):
    rows = [{"question": "What is 6 * 7?", "answer": "42"}]
    env = data_env(tmp_path, rows, columns={"prompt": "question"},
                   reward=[{"verifier": "math", "weight": 0.5},
                           {"verifier": "python", "weight": 0.25, "params": {"function": "my_rewards:contains_solution"}},
                           {"verifier": "python", "weight": 0.25, "params": {"function": "my_rewards:needs_no_kwargs"},
                            "name": "again"}])
    assert env.verifier_names == ["math", "contains_solution", "again"]
    row = env.rows("test", 1)[0]  # no `solution` column: both python rewards say so, per completion
    results = env.score(["<answer>42</answer>", "<answer>41</answer>"], [row, row])
    parts = results[0].details["components"]
    assert parts["contains_solution"]["status"] == "error"
    assert "my_rewards:contains_solution takes a parameter 'solution' that is not a column of the data " \
           "(columns: answer)" in \
        parts["contains_solution"]["details"]["error"]
    assert [r.reward for r in results] == [0.5, 0.0]
    env.shutdown()

    rows = [{"question": "What is 6 * 7?", "answer": "42", "solution": "42"}]
    env = data_env(tmp_path, rows, columns={"prompt": "question"},
                   reward=[{"verifier": "math", "weight": 0.5},
                           {"verifier": "python", "weight": 0.25, "params": {"function": "my_rewards:contains_solution"}},
                           {"verifier": "python", "weight": 0.25, "params": {"function": "my_rewards:reward_len"},
                            "gate": "math"}])
    row = env.rows("test", 1)[0]
    results = env.score(["<answer>42</answer>", "<answer>41</answer>"], [row, row])
    assert [r.reward for r in results] == [0.5 + 0.25 + 0.25 * -(20 - 19), 0.0]  # len('<answer>42</answer>') == 19
    assert results[1].details["components"]["reward_len"]["gated_off"]
    env.shutdown()
    with pytest.raises(ConfigError, match="reward component name 'reward_len' is used twice; give one a 'name'"):
        build_reward([{"verifier": "python", "params": {"function": "my_rewards:reward_len"}}] * 2)


@pytest.mark.parametrize("function,match", [
    ("my_rewards.reward_len", r"'function' must be 'module:function' \(e.g. my_rewards:accuracy\), got "
                              r"'my_rewards.reward_len'"),
    ("no_such_module:f", r"function 'no_such_module:f': cannot import module 'no_such_module' \(No module named "
                         r"'no_such_module'\); it must be importable from the working directory"),
    ("my_rewards:accuracy", r"module 'my_rewards' has no attribute 'accuracy' \(its functions: async_len, "
                            r"contains_solution, format_reward_func, needs_no_kwargs, one_short, raises"),
    ("my_rewards:NOT_A_FUNCTION", r"my_rewards:NOT_A_FUNCTION is a int, not a function"),
    ("my_rewards:wants_ids", r"it requires `completion_ids`, which rlvr does not pass"),
])
def test_a_bad_function_is_refused_when_the_reward_is_built(rewards_module, function, match):
    with pytest.raises(ConfigError, match=match) as info:
        build_reward([{"verifier": "python", "params": {"function": function}}])
    assert str(info.value).startswith("reward entry 0: python verifier: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("function,params,status,message", [
    ("raises", {}, Status.ERROR, "my_rewards:raises raised ZeroDivisionError: float division by zero (at my_rewards.py:"),
    ("one_short", {}, Status.ERROR, "my_rewards:one_short returned 2 values for 3 completions; a reward function "
                                    "returns one number (or None) per completion"),
    ("says_yes", {}, Status.ERROR, "my_rewards:says_yes returned str, not a list of 3 numbers (one per completion)"),
    ("sleeps", {"timeout": 1}, Status.TIMEOUT, "my_rewards:sleeps took over 1 s for 3 completion(s); worker killed"),
])
def test_a_failing_call_is_a_status_and_one_line_per_completion(rewards_module, python_reward, function, params,
                                                                 status, message):
    verifier = python_reward(f"my_rewards:{function}", **params)
    results = verifier.verify_batch(["a", "b", "c"], [{"solution": "a"}] * 3)
    assert [r.status for r in results] == [status] * 3 and [r.reward for r in results] == [0.0] * 3
    assert all(message in (r.details.get("error") or r.details.get("reason")) for r in results), results[0].details
    assert verifier.verify_batch(["a"], [{"solution": "a"}])[0].status == status  # and the next call still runs


def test_batch_size_splits_the_calls(rewards_module, python_reward):
    whole = python_reward("my_rewards:one_short")  # one call of 5: 4 values, wrong for all 5
    assert {r.status for r in whole.verify_batch(list("abcde"), [{}] * 5)} == {Status.ERROR}
    split = python_reward("my_rewards:reward_len", batch_size=2, workers=2)
    assert [r.reward for r in split.verify_batch(list("abcde"), [{}] * 5)] == [-19.0] * 5


@pytest.mark.parametrize("params,match", [
    ({"function": "m:f", "timeout": 0}, "'timeout' must be seconds > 0"),
    ({"function": "m:f", "batch_size": 0}, "'batch_size' must be an int >= 1 or null"),
    ({"function": "m:f", "workers": 0}, "'workers' must be an int >= 1 or null"),
])
def test_bad_params_name_the_param(params, match):
    with pytest.raises(ConfigError, match=match):
        build_verifier("python", **params)


@pytest.mark.parametrize("function,message", [
    ("raises_for_one", "my_rewards:raises_for_one raised ValueError: cannot score poison (at my_rewards.py:"),
    ("worker_dies_for_one", "my_rewards:worker_dies_for_one: the worker failed"),
])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_one_completion_that_makes_the_call_fail_costs_only_its_own_score(rewards_module, python_reward, function,
                                                                           message, batch_size):
    # one call scores a batch: a completion that makes the user's function raise once failed all of its batch
    verifier = python_reward(f"my_rewards:{function}", batch_size=batch_size, workers=1, correct_at=3.0)
    completions = ["ab", "poison", "abcd", "abc", "a"]
    results = verifier.verify_batch(completions, [{}] * 5)
    assert [r.status for r in results] == [Status.INCORRECT, Status.ERROR, Status.CORRECT, Status.CORRECT,
                                           Status.INCORRECT]
    assert [r.reward for r in results] == [2.0, 0.0, 4.0, 3.0, 1.0]
    assert message in results[1].details["error"]
    # the completions scored alone say why; a call that did not fail (batch_size=2: the last two) says nothing
    alone = [i for i, r in enumerate(results) if "batch_error" in r.details]
    assert alone == ([0, 1, 2, 3, 4] if batch_size is None else [0, 1])
    assert all(message in results[i].details["batch_error"] for i in alone)


def test_a_value_that_is_not_a_number_fails_only_its_own_completion(rewards_module, python_reward):
    verifier = python_reward("my_rewards:values_bad_for_one")
    results = verifier.verify_batch(["a", "poison", "text", "abc"], [{}] * 4)
    assert [r.status for r in results] == [Status.CORRECT, Status.ERROR, Status.ERROR, Status.CORRECT]
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, 3.0]
    assert results[1].details["error"] == "my_rewards:values_bad_for_one returned value 1 is inf, not a finite number"
    assert results[2].details["error"] == ("my_rewards:values_bad_for_one returned value 2 is 'high', not a number "
                                           "(or None)")


def test_completions_that_each_hang_cannot_multiply_the_batchs_time(rewards_module, python_reward):
    """Made one at a time, each "hang" would overrun its own 1 s; the calls stop starting once the batch's
    re-scoring has taken its 1 s, so at most one of them runs (the budget is checked between rounds, never timed
    here), and the completions not reached are errors that say so."""
    verifier = python_reward("my_rewards:raises_or_hangs", timeout=1, workers=1)
    results = verifier.verify_batch(["poison", "hang", "hang", "hang", "a"], [{}] * 5)
    assert results[0].status is Status.ERROR and "raised ValueError: cannot score poison" in results[0].details["error"]
    statuses = [r.status for r in results[1:]]
    assert statuses.count(Status.TIMEOUT) <= 1 and statuses[-3:] == [Status.ERROR] * 3
    skipped = [r for r in results[1:] if r.status is Status.ERROR]
    assert all("not scored: scoring this batch one completion at a time ran past 1 s" in r.details["error"]
               for r in skipped)
