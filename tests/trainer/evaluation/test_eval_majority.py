"""maj@k is a number only where the reward says what each correct sample answered (issue 51: a TRL-style python
reward read pass@4 20-30% and maj@4 0.0%, a zero nothing could have voted for). `rlvr eval` end to end with a
stand-in engine and the real verifiers: a python reward gives maj@k null with the reason, in results.json and the
table; the math verifier on the same completions' boxed answers gives maj@k numbers."""

import json
import textwrap

import pytest
import torch

from rlvr.trainer.evaluation.eval_config import compose_eval_config as compose_eval
from rlvr.trainer.evaluation.eval_report import RESULTS_SCHEMA, schema_errors
from rlvr.trainer.evaluation.eval_run import run_eval
from rlvr.trainer.rollout.types import Rollout

ROWS = [{"question": f"What is {a} plus {b}?", "solution": str(a + b)} for a, b in ((2, 3), (4, 4), (1, 6))]


class PlainTokenizer:
    chat_template = "plain"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[-1]["content"]


class Samples:
    """An engine whose sample j of a prompt is `book[prompt][j]`."""

    def __init__(self, book: dict[str, list[str]]):
        self.book, self.tokenizer = book, PlainTokenizer()

    def generate(self, prompts, params):
        texts = [self.book[p][j] for p in prompts for j in range(params.n)]
        n = len(texts)
        return Rollout([[0]] * n, [[0, 1]] * n, texts, [torch.zeros(2)] * n, [False] * n)


@pytest.fixture
def data(tmp_path, monkeypatch):
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "maj_rewards.py").write_text(textwrap.dedent("""
        def contains(completions, solution, **kwargs):
            return [float(s in c) for c, s in zip(completions, solution)]
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _eval(data, book, *overrides):
    (data / "book").mkdir(exist_ok=True)  # a local folder: the context check finds no config.json, asks no Hub
    cfg = compose_eval([f"model.name_or_path={data / 'book'}", "env=dataset", f"env.test_file={data / 'data.jsonl'}",
                        "env.columns.prompt=question", "env.columns.answer=solution", "n_prompts=3", "n_samples=4",
                        "temperature=1.0", f"output_dir={data / 'out'}", *overrides])
    results = run_eval(cfg, log=lambda *_: None, engine_factory=lambda model: Samples(book))
    assert schema_errors(results, RESULTS_SCHEMA) == []
    (result,) = results["results"]
    return result, (data / "out" / "results.md").read_text()


def test_a_reward_without_answers_has_no_maj_at_k_and_says_why(data):
    # sample 0 and 3 hold the sum in prose, 1 and 2 a wrong number: pass@1 50%, and no sample names an answer
    book = {r["question"]: [f"It is {r['solution']}.", "It is 42.", "Maybe 31.", f"{r['solution']}, I think."]
            for r in ROWS}
    result, table = _eval(data, book, 'env.reward=[{verifier:python,params:{function:"maj_rewards:contains"}}]')
    assert result["pass@1"] == 0.5 and result["pass@k"]["4"] == 1.0
    assert result["maj@k"] is None
    assert result["maj@k_na"].startswith("6 of 6 correct samples have no answer to vote on")
    row = next(line for line in table.splitlines() if line.startswith(f"| {data / 'book'} |"))
    assert "| 100.0% | n/a |" in row  # pass@4, then maj@4
    assert f"maj@4 n/a for {data / 'book'}: 6 of 6 correct samples have no answer to vote on" in table
    record = json.loads((data / "out" / "completions.jsonl").read_text().splitlines()[0])
    assert record["answer"] in {r["solution"] for r in ROWS}  # the gold of the mapped column


def test_a_record_without_a_mapped_answer_says_null_and_keeps_the_rows_columns(data):
    """A python reward reading `solution` needs no answer column: the record said `"answer": ""`, an empty gold."""
    book = {r["question"]: [r["solution"]] * 2 for r in ROWS}
    _eval(data, book, "env.columns.answer=null", "n_samples=2",
          'env.reward=[{verifier:python,params:{function:"maj_rewards:contains"}}]')
    records = [json.loads(line) for line in (data / "out" / "completions.jsonl").read_text().splitlines()]
    assert {r["answer"] for r in records} == {None}
    assert sorted({r["columns"]["solution"] for r in records}) == sorted(r["solution"] for r in ROWS)
    assert all(r["status"] == "correct" for r in records)


def test_the_math_verifier_votes_on_its_answers(data):
    book = {r["question"]: [f"\\boxed{{{r['solution']}}}", "\\boxed{99}", "\\boxed{99}", f"\\boxed{{{r['solution']}}}"]
            for r in ROWS}
    result, table = _eval(data, book)  # dataset's default reward: math on the answer column
    assert result["pass@1"] == 0.5
    # first k samples' majority: k=1 right; k=2 a tie, the first seen (right); k=3 99 twice; k=4 a tie, right
    assert result["maj@k"] == {"1": 1.0, "2": 1.0, "3": 0.0, "4": 1.0} and result["maj@k_na"] is None
    assert "n/a" not in table
