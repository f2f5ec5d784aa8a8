"""`rlvr eval 'models=[RUN]'` renders prompts as the run did: a run trained with `model.prompt_format=plain` saves
the plain template with each checkpoint, but the base model evaluated beside them (step 0 of the run's plot) has its
own tokenizer's chat template, so on eval's default (chat) it was scored on prompts the run never used (issue 51).
The run's `model.prompt_format` is taken like its env and lengths, printed among them, and the command line wins."""

import json

import pytest

from rlvr.trainer.evaluation import evaluate


@pytest.fixture(scope="module")
def plain_run(tiny_lm, tmp_path_factory):
    """One step of the tiny test model (whose tokenizer has a chat template) with model.prompt_format=plain."""
    from rlvr import api

    root = tmp_path_factory.mktemp("plain_run")
    run = api.train("rollout=hf", f"output_dir={root / 'run'}", log=lambda *a, **k: None, threads=1,
                    model={"name": "hf", "name_or_path": str(tiny_lm.path), "kind": "base", "prompt_format": "plain"},
                    rollout={"max_new_tokens": 4},
                    train={"steps": 1, "prompts_per_step": 2, "completions_per_prompt": 2, "eval_prompts": 2})
    assert run.checkpoint is not None
    return run


@pytest.fixture
def rendered(monkeypatch):
    """{tokenizer path: the prompts rendered for it}, as evaluate_rows hands them to the engine."""
    seen: dict[str, list[str]] = {}
    real = evaluate.render_prompts

    def spy(tokenizer, env, rows):
        prompts = real(tokenizer, env, rows)
        seen.setdefault(str(tokenizer.name_or_path), []).extend(prompts)
        return prompts

    monkeypatch.setattr(evaluate, "render_prompts", spy)
    return seen


def _messages(tmp_path) -> list[list[dict]]:
    lines = (tmp_path / "out" / "completions.jsonl").read_text().splitlines()
    return [json.loads(line)["messages"] for line in lines]


def test_eval_of_a_plain_run_renders_every_model_plain_and_says_so(plain_run, tiny_lm, rlvr_cli, rendered, tmp_path):
    code, output = rlvr_cli("eval", f"models=[{plain_run.run_dir}]", "n_prompts=2", "threads=1", "output_dir=out")
    assert code == 0, output[-3000:]
    assert "\n  model.prompt_format=plain\n" in output  # among what it took from the run
    assert set(rendered) == {str(tiny_lm.path), str(plain_run.checkpoint)}  # the base model, then step 1
    plain = {"".join(m["content"] + "\n\n" for m in messages) for messages in _messages(tmp_path)}
    for path, prompts in rendered.items():
        assert set(prompts) <= plain and "<|im_start|>" not in "".join(prompts), (path, prompts[:1])
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["from_run"]["taken"]["model.prompt_format"] == "plain"


def test_the_command_line_chat_wins_over_the_runs_plain(plain_run, tiny_lm, rlvr_cli, rendered, tmp_path):
    code, output = rlvr_cli("eval", f"models=[{plain_run.run_dir}]", "model.prompt_format=chat", "n_prompts=2",
                            "threads=1", "output_dir=out")
    assert code == 0, output[-3000:]
    assert "set on the command line instead of the run's:\n  model.prompt_format=chat" in output
    base = rendered[str(tiny_lm.path)]
    assert base and all(p.startswith("<|im_start|>user\n") for p in base)  # the tokenizer's own chat template


def test_an_unknown_prompt_format_is_refused_by_name(plain_run, rlvr_cli):
    code, output = rlvr_cli("eval", f"models=[{plain_run.run_dir}]", "model.prompt_format=markdown", "n_prompts=2",
                            "threads=1", "output_dir=out")
    assert code != 0 and "model.prompt_format='markdown'; choose one of chat, plain" in output, output[-2000:]
