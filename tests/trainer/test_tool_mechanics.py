"""The tool-use warm start's mechanics transcripts (`env.reference_tool_mechanics`) and the stopping rule that
reads them (`model.warm_start.stop_on=transcripts`): trainer/models/transcripts.py, trainer/warm_start.py.

The learning result they serve (GRPO with the tool vs without, over seeds) is bench/bench_tools.py.
"""

import re
import shlex
from pathlib import Path

import pytest
import torch

from rlvr.envs import load_env
from rlvr.trainer.models.tiny_model import build_model, tokenizer_corpus, train_tokenizer
from rlvr.trainer.models.transcripts import tool_transcripts, transcript_accuracy, transcript_ids, warm_start_examples

ROOT = Path(__file__).resolve().parents[2]
ARCH = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64, max_positions=160)


@pytest.fixture(scope="module")
def tok():
    env = load_env("tool_multiply", digits=3, reference_tool_fraction=1.0)
    return train_tokenizer(tokenizer_corpus(env, 200, 0), 512)


def _env(**kwargs):
    return load_env("tool_multiply", digits=3, reference_tool_fraction=0.2, **kwargs)


def test_a_direct_row_also_trains_its_tool_call_but_not_the_choice_to_make_it(tok):
    env, plain = _env(reference_tool_mechanics=True), _env()
    always = load_env("tool_multiply", digits=3, reference_tool_fraction=1.0)
    rows = env.rows("train", 60, seed=0)
    direct = [r for r in rows if len(env.reference_trajectory(r)) == 1]
    calling = [r for r in rows if len(env.reference_trajectory(r)) == 3]
    assert direct and calling
    row = direct[0]
    (chosen, chosen_mask), (tool, tool_mask) = warm_start_examples(tok, env, row)
    assert (chosen, chosen_mask) == transcript_ids(tok, env, row)  # the direct answer, trained in full
    full_ids, full_mask = transcript_ids(tok, always, row)  # the same row's tool transcript, first token trained
    assert tool == full_ids and full_mask[0] == 1
    assert tool_mask == [0] + full_mask[1:]  # only the choice of the first token is left out
    assert chosen[0] != tool[0]  # the two transcripts part at that very token
    # a row that calls the tool, the switch off, or no tools at all: the reference transcript alone
    assert warm_start_examples(tok, env, calling[0]) == [transcript_ids(tok, env, calling[0])]
    assert warm_start_examples(tok, plain, row) == [transcript_ids(tok, plain, row)]
    no_tools = _env(reference_tool_mechanics=True, tools_enabled=False)
    assert warm_start_examples(tok, no_tools, row) == [transcript_ids(tok, no_tools, row)]
    with pytest.raises(Exception, match="reference_tool_mechanics"):
        _env(reference_tool_mechanics="yes")


def test_validation_reads_one_tool_transcript_per_row_with_mechanics_and_the_calling_share_without(tok):
    rows = _env().rows("train", 60, seed=1)
    with_mechanics = tool_transcripts(tok, _env(reference_tool_mechanics=True), rows)
    assert [r["id"] for r, _ in with_mechanics] == [r["id"] for r in rows]
    calling = [r["id"] for r in rows if len(_env().reference_trajectory(r)) == 3]
    assert [r["id"] for r, _ in tool_transcripts(tok, _env(), rows)] == calling
    assert all(mask[0] == 1 and 0 in mask for _, (_, mask) in with_mechanics)


class _Oracle(torch.nn.Module):
    """Predicts each next token of the batch it is given, except where `wrong[(row, column)]` says otherwise."""

    def __init__(self, vocab: int, wrong: dict):
        super().__init__()
        self.vocab, self.wrong = vocab, wrong

    def forward(self, input_ids, attention_mask):
        logits = torch.zeros(*input_ids.shape, self.vocab)  # [N, L, V]
        nxt = torch.roll(input_ids, -1, dims=1)  # [N, L]: position t predicts token t+1
        logits.scatter_(2, nxt.unsqueeze(-1), 1.0)
        for (row, column), token in self.wrong.items():
            logits[row, column] = 0.0
            logits[row, column, token] = 1.0
        return type("Out", (), {"logits": logits})()


def test_transcript_accuracy_counts_whole_transcripts_and_skips_the_choice_token(tok):
    env = _env(reference_tool_mechanics=True)
    pairs = tool_transcripts(tok, env, env.rows("train", 4, seed=2))
    prompts = [tok(f"p{i}", add_special_tokens=False)["input_ids"] for i in range(4)]
    transcripts = [t for _, t in pairs]
    vocab = len(tok)

    def accuracy(wrong):
        return transcript_accuracy(_Oracle(vocab, wrong), prompts, transcripts, tok.pad_token_id)

    first = [len(p) - 1 for p in prompts]  # the column predicting each transcript's first token
    assert accuracy({}) == 1.0
    # a wrong choice token on every row is not counted: the warm start leaves that choice to sampling
    assert accuracy({(i, first[i]): 7 for i in range(4)}) == 1.0
    # one wrong copied digit (a few tokens in) spoils that row alone: 3 of 4 transcripts exact
    assert accuracy({(2, first[2] + 20): 7}) == 0.75
    assert accuracy({(0, first[0] + 5): 7, (3, first[3] + len(transcripts[3][0]) - 1): 7}) == 0.5


def test_stop_on_transcripts_logs_its_measure_and_refuses_an_env_without_transcripts(tok):
    from rlvr.trainer.warm_start import warm_start

    env = _env(reference_tool_mechanics=True)
    model = build_model(tok, **ARCH, seed=0)
    lines = []
    report = warm_start(model, tok, env, target_accuracy=[1.0, 1.0], max_steps=6, batch_size=4, lr=1e-3,
                        eval_every=1, eval_rows=6, max_new_tokens=40, seed=0, stop_on="transcripts", log=lines.append)
    # 0 exact transcripts after 3 of 6 steps, far below the target: the give-up rule reads this measure too
    assert report["stop_on"] == "transcripts" and report["out_of_reach"] and report["steps"] == 3
    assert [h["val_accuracy"] for h in report["history"]] == [0.0, 0.0, 0.0]
    assert "tool-transcript accuracy (6 rows, teacher-forced)" in lines[0], lines[0]
    arithmetic = load_env("arithmetic", digits=1)
    arith_tok = train_tokenizer(tokenizer_corpus(arithmetic, 100, 0), 512)
    with pytest.raises(ValueError, match="stop_on=transcripts needs an environment with reference_trajectory"):
        warm_start(build_model(arith_tok, **ARCH, seed=0), arith_tok, arithmetic, target_accuracy=[1.0, 1.0],
                   max_steps=1, batch_size=2, lr=1e-3, eval_every=1, eval_rows=2, max_new_tokens=4, seed=0,
                   stop_on="transcripts", log=lambda *_: None)
    with pytest.raises(ValueError, match="must be greedy or transcripts"):
        warm_start(model, tok, env, target_accuracy=[1.0, 1.0], max_steps=1, batch_size=2, lr=1e-3, eval_every=1,
                   eval_rows=2, max_new_tokens=4, seed=0, stop_on="teacher", log=lambda *_: None)


def test_make_demo_tools_runs_the_benchmark_config():
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_tools import DEMO_TOOLS

    recipe = re.search(r"^demo-tools:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    words = shlex.split(recipe.replace("\\\n", " "))
    overrides = [w for w in words[2:] if w not in ("$(ARGS)",)]
    assert words[1] == "train"
    assert overrides == [*DEMO_TOOLS, "train.steps=40", "train.save_every=40"]
