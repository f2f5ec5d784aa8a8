"""What algo=sft trains on (trainer/algos/sft_data.py, sft.py): data=FILE's three row shapes, a bad row refused with
its line and field before any model loads, the references' batch with the prompt masked, and RFT's choice of
completions (only verified-correct ones, distinct, at most algo.keep_per_prompt per prompt) under a scripted
verifier."""

import json

import pytest

from rlvr.errors import ConfigError
from rlvr.trainer.algos.sft_data import read_sft_file, reference_batch


def _write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_the_three_row_shapes_read_alike(tmp_path):
    path = _write(tmp_path / "sft.jsonl", [
        {"prompt": "2+3=", "completion": "5"},
        "",  # blank lines are skipped, and still counted
        {"prompt": [{"role": "user", "content": "2+3="}], "completion": [{"role": "assistant", "content": "5"}]},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+3="},
                      {"role": "assistant", "content": "5"}]},
    ])
    one, two, three = read_sft_file(path)
    assert one == two == ([{"role": "user", "content": "2+3="}], "5")
    assert three == ([{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+3="}], "5")


@pytest.mark.parametrize("bad, message", [
    ("{not json", r"line 3: not valid JSON"),
    ([1, 2], r"line 3: expected a JSON object, got list"),
    ({"prompt": "2+3="}, r"line 3: field 'completion' is missing"),
    ({"completion": "5"}, r"line 3: field 'prompt' \(or 'messages'\) is missing"),
    ({"prompt": "2+3=", "completion": 5}, r"line 3: field 'completion' must be a string"),
    ({"prompt": [{"role": "user"}], "completion": [{"role": "assistant", "content": "5"}]},
     r"line 3: field 'prompt' must be"),
    ({"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "user", "content": "5"}]},
     r"line 3: field 'completion' must be one assistant message"),
    ({"messages": [{"role": "user", "content": "2+3="}]}, r"line 3: field 'messages' must end with an assistant"),
])
def test_a_bad_row_is_refused_naming_its_line_and_field(tmp_path, bad, message):
    good = {"prompt": "1+1=", "completion": "2"}
    path = _write(tmp_path / "sft.jsonl", [good, good, bad if isinstance(bad, str) else json.dumps(bad)])
    with pytest.raises(ConfigError, match=message):
        read_sft_file(path)


def test_a_bad_file_stops_the_run_before_any_model_loads(compose_train, tmp_path):
    from rlvr.trainer.validate import validate_train_config

    path = _write(tmp_path / "sft.jsonl", [{"prompt": "1+1=", "completion": "2"}, {"prompt": "1+2="}])
    with pytest.raises(ConfigError, match=r"sft.jsonl line 2: field 'completion' is missing"):
        validate_train_config(compose_train(["algo=sft", f"data={path}", f"output_dir={tmp_path / 'run'}"]))
    with pytest.raises(ConfigError, match=r"data=.* is read by algo.source=data \(or auto\), not algo.source=rft"):
        validate_train_config(compose_train(["algo=sft", "algo.source=rft", f"data={path}"]))
    with pytest.raises(ConfigError, match=r"algo.source=data needs data=FILE"):
        validate_train_config(compose_train(["algo=sft", "algo.source=data"]))
    with pytest.raises(ConfigError, match=r"algo.keep_per_prompt=0 must be >= 1"):
        validate_train_config(compose_train(["algo=sft", "algo.source=rft", "algo.keep_per_prompt=0"]))


def test_reference_batch_masks_the_prompt_and_ends_with_eos(tiny_lm, arith_env):
    rows = arith_env.rows("train", 3, seed=0)
    tok = tiny_lm.tokenizer
    batch = reference_batch(tok, arith_env, rows)
    for i, row in enumerate(rows):
        trained = batch.input_ids[i, 1:][batch.completion_mask[i].bool()].tolist()  # the targets the loss reads
        assert trained == tok(row["reference"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


def test_rft_keeps_only_verified_correct_distinct_completions_at_most_k_per_prompt():
    from rlvr.trainer.algos.sft import kept_completions
    from rlvr.verifiers.result import Status, VerifyResult

    # a scripted verifier's verdicts on 2 prompts x 5 completions; ids tell the completions apart
    verdicts = [
        # prompt 0: correct, incorrect, correct (same ids as the first), correct but screened, correct
        (Status.CORRECT, {}, [1]), (Status.INCORRECT, {}, [2]), (Status.CORRECT, {}, [1]),
        (Status.CORRECT, {"screened": True}, [3]), (Status.CORRECT, {}, [4]),
        # prompt 1: unparsable, a partly rewarded incorrect one, timeout, error, incorrect: nothing kept
        (Status.UNPARSABLE, {}, [5]), (Status.INCORRECT, {}, [6]), (Status.TIMEOUT, {}, [7]),
        (Status.ERROR, {}, [8]), (Status.INCORRECT, {}, [9]),
    ]
    results = [VerifyResult(0.5 if status is Status.INCORRECT else float(status is Status.CORRECT), status, details)
               for status, details, _ in verdicts]
    ids = [c for _, _, c in verdicts]
    assert kept_completions(results, ids, group_size=5, keep_per_prompt=4) == [0, 4]
    assert kept_completions(results, ids, group_size=5, keep_per_prompt=1) == [0]
    everything_right = [VerifyResult(1.0, Status.CORRECT)] * 10
    distinct = [[k] for k in range(10)]
    assert kept_completions(everything_right, distinct, group_size=5, keep_per_prompt=2) == [0, 1, 5, 6]
