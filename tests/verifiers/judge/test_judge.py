"""verifier=judge (verifiers/judge/): strict verdicts, the cache, timeouts from outside, rubric weights, hybrid
counts, and the gate `rlvr train` runs on a judge, all against a fake OpenAI-compatible server in the test."""

from __future__ import annotations

import logging

import pytest
from omegaconf import OmegaConf

from tests.judge_server import FakeJudge, fair, response_of
from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.trainer.judge_setup import gate_judges
from rlvr.verifiers.judge.verdict import VerdictError, parse_verdict
from rlvr.verifiers.judge.prompt import GOLD_LABELS
from rlvr.verifiers.registry import build_verifier
from rlvr.verifiers.result import Status

ROW = {"messages": [{"role": "user", "content": "What is 2+3?"}], "answer": "5"}


@pytest.fixture
def judge_server(request):
    servers = []

    def start(handler):
        servers.append(FakeJudge(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("reply, label", [("CORRECT", "CORRECT"), ("incorrect", "INCORRECT"), ("**Correct.**", "CORRECT"),
                                          ("Verdict: INCORRECT", "INCORRECT"),
                                          ("CORRECT\nThe sum is 5, as the reference says.", "CORRECT")])
def test_a_verdict_is_read_when_it_is_exactly_a_label(reply, label):
    assert parse_verdict(reply, GOLD_LABELS)[0] == label


@pytest.mark.parametrize("reply", ["", "   \n", "The answer is correct.", "correct-ish", "I think it is CORRECT",
                                   "CORRECT\nINCORRECT", "Score: 7/10", "INCORRECTLY CORRECT"])
def test_a_reply_that_is_not_a_label_is_a_verdict_error(reply):
    with pytest.raises(VerdictError):
        parse_verdict(reply, GOLD_LABELS)


def test_a_garbage_reply_is_status_error_never_a_score(judge_server):
    server = judge_server(lambda prompt: "Well, the student seems mostly correct!")
    judge = build_verifier("judge", url=server.url)
    result = judge("<answer>5</answer>", ROW)
    assert (result.status, result.reward) == (Status.ERROR, 0.0)
    assert "not one of CORRECT, INCORRECT" in result.details["error"]


def test_the_judge_sees_the_answer_span_and_the_gold(judge_server):
    server = judge_server(fair)
    judge = build_verifier("judge", url=server.url)
    results = judge.verify_batch(["I worked hard. <answer>5</answer>", "<answer>6</answer>"], [ROW, ROW])
    assert [r.status for r in results] == [Status.CORRECT, Status.INCORRECT]
    assert [r.reward for r in results] == [1.0, 0.0]
    # the batch's requests run at once, so the server saw them in either order: each judged the span alone
    assert sorted(map(response_of, server.prompts)) == ["5", "6"]
    assert all("What is 2+3?" in prompt for prompt in server.prompts)


def test_a_judged_completion_is_cached_and_errors_are_asked_again(judge_server):
    replies = iter(["oops", "CORRECT"])
    server = judge_server(lambda prompt: next(replies) if "<<<\n5\n>>>" in prompt else "INCORRECT")
    judge = build_verifier("judge", url=server.url)
    assert judge("<answer>5</answer>", ROW).status is Status.ERROR  # not cached: asked again
    assert judge("<answer>5</answer>", ROW).status is Status.CORRECT
    assert server.requests == 2
    # the same (prompt, completion) again, alone and twice in one batch: no request
    assert [r.status for r in judge.verify_batch(["<answer>5</answer>"] * 2, [ROW, ROW])] == [Status.CORRECT] * 2
    assert server.requests == 2
    # another completion, twice in one batch: asked once
    judge.verify_batch(["<answer>4</answer>"] * 2, [ROW, ROW])
    assert server.requests == 3


def test_a_hanging_judge_gives_timeout_per_request(judge_server):
    server = judge_server(lambda prompt: None)
    judge = build_verifier("judge", url=server.url, timeout=0.5, batch_timeout=60)
    result = judge("<answer>5</answer>", ROW)
    assert result.status is Status.TIMEOUT and "judge.timeout" in result.details["error"]


def test_the_batch_deadline_holds_when_requests_may_wait_longer(judge_server):
    server = judge_server(lambda prompt: None if "<<<\n6\n>>>" in prompt else "CORRECT")
    judge = build_verifier("judge", url=server.url, timeout=120, batch_timeout=1.0, concurrency=2)
    results = judge.verify_batch(["<answer>5</answer>", "<answer>6</answer>"], [ROW, ROW])
    assert results[0].status is Status.CORRECT
    assert results[1].status is Status.TIMEOUT and "batch_timeout" in results[1].details["error"]


def test_a_rubric_reward_is_the_weighted_share_of_yes(judge_server):
    server = judge_server(lambda prompt: "YES" if "Criterion: polite" in prompt else "NO")
    judge = build_verifier("judge", url=server.url, rubric=[{"criterion": "polite", "weight": 3},
                                                            {"criterion": "cites a source", "weight": 1}],
                           correct_at=0.7)
    result = judge("Thank you for asking! It is 5.", {"messages": ROW["messages"]})
    assert result.reward == pytest.approx(0.75) and result.status is Status.CORRECT
    assert result.details["criteria"] == ["YES", "NO"] and server.requests == 2


def test_a_gold_judge_without_an_answer_is_an_error_naming_the_field(judge_server):
    server = judge_server(fair)
    result = build_verifier("judge", url=server.url)("<answer>5</answer>", {"messages": ROW["messages"]})
    assert result.status is Status.ERROR and "'answer'" in result.details["error"] and server.requests == 0


def test_a_judge_needs_a_url_outside_rlvr_train():
    with pytest.raises(ConfigError, match="served only by `rlvr train`"):
        build_verifier("judge", checkpoint="smollm2")


def test_hybrid_asks_the_judge_only_about_rule_negatives_and_counts_overturns(judge_server):
    # the judge accepts 1/2 for 0.5 (a right answer the exact rule misses) and nothing else
    server = judge_server(lambda prompt: "CORRECT" if response_of(prompt) in ("1/2", "0.5") else "INCORRECT")
    judge = build_verifier("judge", url=server.url, mode="hybrid", rule={"verifier": "exact"})
    row = {**ROW, "answer": "0.5"}
    results = judge.verify_batch(["<answer>0.5</answer>", "<answer>1/2</answer>", "<answer>7</answer>", "no tag"],
                                 [row] * 4)
    assert [r.status for r in results] == [Status.CORRECT, Status.CORRECT, Status.INCORRECT, Status.UNPARSABLE]
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 0.0]
    assert [r.details["hybrid"]["overturned"] for r in results] == [False, True, False, False]
    assert server.requests == 3  # the rule's positive was never sent
    assert (judge.counts["rule_negatives"], judge.counts["overturned"]) == (3, 1)


def _env(url: str, **params):
    return load_env("arithmetic", reward=[{"verifier": "judge", "params": {"url": url, **params}}])


def test_the_gate_stops_a_judge_that_accepts_master_keys(judge_server):
    server = judge_server(lambda prompt: "CORRECT")
    with pytest.raises(ConfigError, match="judge gate stopped the run") as caught:
        gate_judges(OmegaConf.create({"seed": 0}), _env(server.url), log=lambda *a: None)
    table = str(caught.value)
    for name in ("master_keys", "master_keys_in_format", "judge_injection", "hedge_or", "wrong_answer"):
        assert f"{name} " in table
    assert "12/12" in table and "<- above the threshold" in table  # 4 master keys x 3 rows, all accepted


def test_the_gate_passes_a_judge_that_refuses_them(judge_server):
    server = judge_server(fair)
    lines = []
    gate_judges(OmegaConf.create({"seed": 0}), _env(server.url), log=lines.append)
    assert "honest" in lines[0] and "above the threshold" not in lines[0]
    assert server.requests > 0


def test_the_gate_turned_off_warns_and_asks_nothing(judge_server):
    server = judge_server(lambda prompt: "CORRECT")
    lines = []
    gate_judges(OmegaConf.create({"seed": 0}), _env(server.url, gate=False), log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("WARNING: the judge gate is OFF")
    assert server.requests == 0


def test_hybrid_logs_the_overturn_counts(judge_server, caplog):
    server = judge_server(lambda prompt: "CORRECT")
    judge = build_verifier("judge", url=server.url, mode="hybrid", rule={"verifier": "exact"})
    with caplog.at_level(logging.INFO, logger="rlvr.verifiers.judge"):
        judge.verify_batch(["<answer>5</answer>", "<answer>4</answer>"], [ROW, ROW])
    assert "the judge overturned 1" in caplog.text


def test_rlvr_train_stops_at_the_gate_before_any_model_loads(judge_server, compose_train, tmp_path):
    from rlvr.trainer.run import train

    server = judge_server(lambda prompt: "CORRECT")
    cfg = compose_train([f"env.reward=[{{verifier: judge, params: {{url: '{server.url}'}}}}]",
                         f"output_dir={tmp_path / 'run'}"])
    with pytest.raises(ConfigError, match="judge gate stopped the run"):
        train(cfg, log=lambda *a: None)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_rlvr_train_takes_its_rewards_from_a_judge_that_passed_the_gate(judge_server, compose_train, tiny_lm_sft,
                                                                        tmp_path):
    import json

    from rlvr.trainer.run import train

    server = judge_server(fair)
    lines = []
    cfg = compose_train([f"env.reward=[{{verifier: judge, params: {{url: '{server.url}'}}}}]", "model=hf",
                         "model.kind=base", f"model.name_or_path={tiny_lm_sft.path}", "rollout=hf", "env.digits=1",
                         "train.steps=1", "train.prompts_per_step=2", "train.completions_per_prompt=4",
                         "train.eval_every=100", "train.save_every=100", "threads=1", f"output_dir={tmp_path / 'run'}"])
    train(cfg, log=lines.append)
    assert any(line.startswith("judge gate for reward component 'judge'") for line in lines)
    step = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    asked_by_the_gate = 3 * (4 + 4 + 3 + 3 + 2 + 1 + 1)  # gate_rows x the completions of each class and the honest one
    assert server.requests > asked_by_the_gate and "reward/judge" in step
