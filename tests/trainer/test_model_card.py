"""Every checkpoint explains itself (trainer/model_card.py): a Hugging Face model card (README.md) with the base
model, environment, algorithm, step, the held-out eval of that step (or the latest before it, labelled with its
step) as metrics.jsonl logged it, the commands that trained it and the rlvr version, and the full resolved config
(rlvr_config.yaml). In-process through `rlvr.cli.main`, as tests/trainer/test_run_dir.py, and through `train(cfg)`."""

import json
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from rlvr import __version__
from rlvr.trainer.share_paths import local_text, shareable
from tests.cli_run import tiny_train


@pytest.fixture
def rlvr(rlvr_cli):
    """`rlvr(*args)` that must succeed."""
    def run(*args):
        code, output = rlvr_cli(*args)
        assert code in (0, None), output

    return run


def _card(path):
    """(front matter, body, {section title: lines}) of a model card."""
    text = (path / "README.md").read_text()
    _, front, body = text.split("---\n", 2)
    sections, title = {}, None
    for line in body.splitlines():
        if line.startswith("## "):
            title = line[3:]
        elif title:
            sections.setdefault(title, []).append(line)
    return yaml.safe_load(front), body, sections


def _table(lines):
    """{key: value} of a card's `| `key` | value |` rows, values read back as JSON (floats as logged)."""
    rows = [line.split(" | ") for line in lines if line.startswith("| `")]
    return {key.strip("| `"): value.rstrip(" |") for key, value in rows}


def _metrics(run_dir):
    return {m["step"]: m for m in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}


def test_each_checkpoint_carries_its_card_and_config(tiny_lm, tmp_path, rlvr):
    first = tiny_train(tiny_lm, "train.steps=3", "train.save_every=1", "train.eval_every=2", "output_dir=run")
    rlvr(*first)
    run = tmp_path / "run"
    rlvr("train", "resume=run", "train.steps=4")  # a resumed session: its card lists both commands
    metrics = _metrics(run)
    started = shareable("rlvr train " + " ".join(first[1:]), run)  # no machine path (trainer/share_paths.py)
    for step, eval_step in ((1, 0), (2, 2), (3, 3), (4, 4)):  # between evals: the latest one, with its step
        checkpoint = run / "checkpoints" / f"step_{step}"
        front, body, sections = _card(checkpoint)
        assert front == {"library_name": "transformers", "pipeline_tag": "text-generation",
                         "tags": ["rlvr", "grpo", "reinforcement-learning"]}  # a local base: no base_model
        assert f"# GRPO on `arithmetic`, step {step}\n" in body and shareable(str(tiny_lm.path), run) in body
        settings = _table(sections["Training"])
        assert settings["algo.name"] == "grpo" and settings["train.prompts_per_step"] == "2"
        assert "`digits=1`" in "".join(sections["Training"])
        evaluation = sections["Held-out evaluation"]
        assert f"| metric (step {eval_step}) | value |" in evaluation
        assert ("at this step" in "".join(evaluation)) == (eval_step == step)
        logged = {k: v for k, v in metrics[eval_step].items() if k.startswith("eval/")}
        assert {k: json.loads(v) for k, v in _table(evaluation).items()} == logged
        trained = "\n".join(sections["How it was trained"])
        assert f"rlvr {__version__}" in trained and f"# started the run\n{started}\n" in trained
        assert ("# resumed it from step 3\nrlvr train resume=run train.steps=4" in trained) == (step == 4)
        assert "AutoModelForCausalLM.from_pretrained" in "\n".join(sections["Use"])
        saved = OmegaConf.load(checkpoint / "rlvr_config.yaml")  # the config the checkpoint was trained with
        assert saved.train.steps == (4 if step == 4 else 3) and saved.env.digits == 1
        assert saved.resume == ("run" if step == 4 else None)
    shared = (run / "checkpoints" / "step_4" / "rlvr_config.yaml").read_text()
    assert OmegaConf.create(local_text(shared, run)) == OmegaConf.load(run / "config.yaml")  # its paths read back


def test_a_lora_checkpoint_and_its_adapter_carry_cards(tiny_lm, compose_train, tmp_path):
    pytest.importorskip("peft")
    from rlvr.trainer.run import train

    cfg = compose_train(tiny_train(tiny_lm, "train.steps=1", "model.lora.r=4", "algo=dr_grpo", "algo.beta=0.04",
                              f"output_dir={tmp_path}")[1:])
    train(cfg, log=lambda *a, **k: None)
    checkpoint = tmp_path / "checkpoints" / "step_1"
    front, body, sections = _card(checkpoint)
    assert front["library_name"] == "transformers" and front["tags"] == ["rlvr", "dr_grpo", "reinforcement-learning",
                                                                          "lora"]
    assert "merged" in body and _table(sections["Training"])["model.lora.r"] == "4"
    assert _table(sections["Training"])["algo.beta"] == "0.04"
    assert "called from Python" in "".join(sections["How it was trained"])
    adapter_front, adapter_body, _ = _card(checkpoint / "adapter")
    assert adapter_front["library_name"] == "peft" and "PeftModel.from_pretrained" in adapter_body
    assert "[More Information Needed]" not in adapter_body  # peft's template is replaced
    saved = OmegaConf.create(local_text((checkpoint / "rlvr_config.yaml").read_text(), tmp_path))
    assert OmegaConf.to_container(saved) == OmegaConf.to_container(cfg, resolve=True)


def test_front_matter_names_a_hub_base_model_only(tiny_lm, compose_train):
    from rlvr.trainer.model_card import model_card

    def front(name_or_path):
        cfg = compose_train(["model=hf", f"model.name_or_path={name_or_path}"])
        return yaml.safe_load(model_card(cfg, 5, None, [], name_or_path, tiny_lm.model()).split("---\n")[1])

    assert front("Qwen/Qwen2.5-0.5B-Instruct")["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert "base_model" not in front(str(tiny_lm.path))  # a local directory: the Hub would refuse the card
    assert front("smollm2")["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"  # the model the GGUF quantises
    assert "base_model" not in front("/models/my-model.Q8_0.gguf")  # a GGUF file of unknown origin


def test_the_command_line_is_what_was_typed(monkeypatch):
    from rlvr.trainer.model_card import session_command

    added = ["output_dir=run", "hydra.output_subdir=null", "algo=grpo"]  # what rlvr/cli.py adds on resume
    monkeypatch.setattr(sys, "argv", ["rlvr train", "resume=run", "env.note=a b", *added])
    for started in (["/venv/bin/python", "/venv/bin/rlvr"], ["python", "-m", "rlvr"], ["/venv/bin/rlvr"]):
        monkeypatch.setattr(sys, "orig_argv", [*started, "train", "resume=run", "env.note=a b"])
        assert session_command() == "rlvr train resume=run 'env.note=a b'"
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest", "tests"])  # rlvr.cli.main called in-process
    assert session_command() == "rlvr train resume=run 'env.note=a b' " + " ".join(added)
    monkeypatch.setattr(sys, "argv", ["pytest", "tests"])  # train(cfg) called from Python: no command line
    assert session_command() is None


def test_the_card_gives_the_eval_command_that_reads_the_run(tiny_lm, compose_train):
    """`rlvr eval model.name_or_path=FOLDER` takes the run's env, columns, reward and lengths from the folder's
    rlvr_config.yaml (trainer/evaluation/run_config.py): the card says so instead of asking for them retyped."""
    from rlvr.trainer.model_card import model_card

    cfg = compose_train(["env=dataset", "env.train_file=data.jsonl", "env.columns.prompt=question"])
    use = model_card(cfg, 5, None, [], None, tiny_lm.model()).split("## Use\n", 1)[1]
    assert "`rlvr eval model.name_or_path=path/to/this/folder` scores it again" in use
    assert "reads the environment, prompt, reward and lengths from `rlvr_config.yaml`" in use
    assert "env.*` values" not in use and "folder model.kind" not in use.split("rlvr train")[0]
