"""The model card and the training config every checkpoint carries, so that its folder can be shared as it is.

`checkpoints/step_N/README.md` is a Hugging Face model card: YAML front matter (`library_name`, `pipeline_tag`,
`tags`, and `base_model` when the base is a Hub model id: the Hub refuses a card whose `base_model` is not one, so
a local directory, a GGUF file or the built tiny model is named in the text only), then what the checkpoint is:
the base model, the environment, the algorithm and its hyperparameters, the step, the held-out eval of that step
(or, between evals, the latest one before it, labelled with its own step), the command lines that trained it
(the one that started the run and each resume up to this step), the rlvr version, and how to load it.
`rlvr_config.yaml` beside it is the run's full resolved config as the checkpoint was trained with it (the run
directory's `config.yaml` at that step). A LoRA checkpoint's `adapter/` gets the card too, in place of the empty
template peft writes there, saying that it holds the adapter alone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from rlvr import __version__
from rlvr.trainer.models.gguf_import import PACKAGED
from rlvr.trainer.models.lora import lora_on

CARD_FILE = "README.md"
CONFIG_FILE = "rlvr_config.yaml"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, as the Hub spells a model id
_HUB_CACHE_DIR = re.compile(r"models--([A-Za-z0-9][\w.-]*?)--([\w.-]+?)/snapshots/")  # huggingface_hub's layout
_ENGINES = {"hf": "Hugging Face generate", "vllm": "vLLM, colocated", "server": "vLLM servers"}


def session_command() -> str | None:
    """This process's `rlvr train` command line, as typed; None when `train(cfg)` was called from Python.
    rlvr/cli.py hands Hydra `sys.argv = ["rlvr train", *overrides]`, the overrides with what it adds itself
    (a resume's `output_dir=` and `hydra.output_subdir=null`, the saved run's `algo=`) at the end; the words
    the shell passed (`sys.orig_argv`) are taken instead when they are where those overrides begin."""
    if sys.argv[:1] != ["rlvr train"]:
        return None
    overrides, typed = sys.argv[1:], _typed_train_args(getattr(sys, "orig_argv", []))
    if typed is not None and overrides[:len(typed)] == typed:
        overrides = typed
    return shlex.join(["rlvr", "train", *overrides])


def _typed_train_args(argv: list[str]) -> list[str] | None:
    """The words after `train` of `rlvr train ...` or `python -m rlvr train ...`; None for another program."""
    for i, word in enumerate(argv):
        if os.path.basename(word) == "rlvr" or (word == "rlvr" and i and argv[i - 1] == "-m"):
            return argv[i + 2:] if argv[i + 1:i + 2] == ["train"] else None
    return None


def checkpoint_files(cfg, step: int, evaluation: dict | None, commands: list[dict], base_model: str | None,
                     model) -> dict[str, str]:
    """{path inside the checkpoint: text}: the card, the resolved config and, with LoRA, the adapter's card.
    `evaluation` is the latest metrics line with held-out eval keys (metrics.jsonl's, `step` among them);
    `commands` is `[{"step": the step the session started from, "command": its command line or None,
    "world_size": its processes}]`."""
    card = model_card(cfg, step, evaluation, commands, base_model, model)
    files = {CARD_FILE: card, CONFIG_FILE: OmegaConf.to_yaml(cfg, resolve=True)}
    if lora_on(cfg.model.lora):
        files[f"adapter/{CARD_FILE}"] = model_card(cfg, step, evaluation, commands, base_model, model, adapter=True)
    return files


def model_card(cfg, step: int, evaluation: dict | None, commands: list[dict], base_model: str | None, model,
               adapter: bool = False) -> str:
    algo, env, lora = cfg.algo.name, cfg.env.name, lora_on(cfg.model.lora)
    hub = _hub_id(cfg.model.get("name_or_path")) or _hub_id(base_model)
    meta = {**({"base_model": hub} if hub else {}), "library_name": "peft" if adapter else "transformers",
            "pipeline_tag": "text-generation",
            "tags": ["rlvr", algo, "reinforcement-learning", *(["lora"] if lora else [])]}
    what, up = ("LoRA adapter", "../") if adapter else ("model", "")
    lines = ["---", yaml.safe_dump(meta, sort_keys=False).strip(), "---", "",
             f"# {algo.upper()} on `{env}`, step {step}", "",
             f"A {what} trained with reinforcement learning from verifiable rewards by rlvr: "
             f"{_base_text(cfg, base_model, model)}, trained with `{algo}` for {step} of {cfg.train.steps} steps "
             + (f"on preference pairs read from `{cfg.data}` (offline: nothing sampled), evaluated on the `{env}` "
                f"environment's held-out prompts." if cfg.get("data") else
                f"on the `{env}` environment, whose verifiers score each sampled completion, sampled by rlvr's "
                f"`{cfg.rollout.engine}` engine ({_ENGINES.get(cfg.rollout.engine, 'rollout.engine')}).")
             + (" The weights here are merged (W + (alpha / r) B A); `adapter/` holds the LoRA adapter alone."
                if lora and not adapter else ""),
             "", "## Training", "", f"Environment `{env}`: {_params(cfg.env, skip=('name',)) or 'its defaults'}.", "",
             "| setting | value |", "|---|---|"]
    settings = {f"algo.{k}": v for k, v in OmegaConf.to_container(cfg.algo, resolve=True).items()}
    for key in ("optim.lr", "optim.schedule", "optim.warmup_steps", "train.steps", "train.prompts_per_step",
                "train.completions_per_prompt", "rollout.max_new_tokens", "rollout.temperature", "rollout.engine",
                "model.lora.r", "model.lora.alpha", "model.lora.peft", "seed"):
        shown = lora or not key.startswith("model.lora.")
        if shown and (key != "model.lora.peft" or cfg.model.lora.get("peft")):
            value = OmegaConf.select(cfg, key, default=None)
            settings[key] = OmegaConf.to_container(value) if isinstance(value, DictConfig) else value
    lines += [f"| `{k}` | {_value(v)} |" for k, v in settings.items()]
    lines += ["", "## Held-out evaluation", "", *_eval_lines(evaluation, step, cfg), "",
              "## How it was trained", "", f"rlvr {__version__}, with:", "", *_command_lines(commands), "",
              f"`{up}{CONFIG_FILE}` is the run's full resolved config (every default and override). "
              f"`{up}trainer_state.pt` (optimizer, scheduler, RNG) only serves `rlvr train resume=RUN_DIR`; the model "
              "does not need it.", "", "## Use", "", *_use_lines(cfg, base_model, adapter)]
    return "\n".join(lines) + "\n"


def _hub_id(name_or_path) -> str | None:
    """The Hub model id of a base model: a Hub name, a packaged GGUF's source, or a folder of Hugging Face's hub
    cache (`.../models--OWNER--NAME/snapshots/REV`, where a Hub download lands)."""
    name = str(name_or_path or "")
    if name in PACKAGED:  # a packaged GGUF names the Hub model it was quantised from
        return PACKAGED[name].hub_id
    if _HUB_ID.match(name) and not name.endswith(".gguf") and not Path(name).exists():
        return name
    cached = _HUB_CACHE_DIR.search(name)
    return f"{cached.group(1)}/{cached.group(2)}" if cached else None


def _base_text(cfg, base_model: str | None, model) -> str:
    size = _parameters(model)
    if cfg.model.name == "tiny" and not cfg.model.get("name_or_path"):
        arch = cfg.model.arch
        return (f"rlvr's built-in tiny model ({size} parameters, Qwen2 architecture, {arch.num_layers} layers of "
                f"width {arch.hidden_size}, a BPE tokenizer trained on `{cfg.env.name}`'s text, warm-started on its "
                f"reference solutions; built offline, not on the Hub) as the base model")
    name = cfg.model.name_or_path
    built = f"; converted into `{base_model}`" if base_model and base_model != str(name) else ""
    return f"`{name}` ({size} parameters{built}) as the base model"


def _parameters(model) -> str:
    count = sum(p.numel() for name, p in model.named_parameters() if "lora_" not in name)
    return f"{count / 1e9:.2f}B" if count >= 1e9 else f"{count / 1e6:.2f}M"


def _params(node, skip=()) -> str:
    values = OmegaConf.to_container(node, resolve=True)
    return ", ".join(f"`{k}={_value(v)}`" for k, v in values.items() if k not in skip)


def _value(value) -> str:
    if value is None or isinstance(value, (bool, list, dict)):  # null, true, [...]: as JSON (and YAML) write them
        return json.dumps(value)
    return repr(value) if isinstance(value, float) else str(value)


def _eval_lines(evaluation: dict | None, step: int, cfg) -> list[str]:
    if not evaluation:
        return ["No held-out eval has run yet."]
    at = evaluation["step"]
    when = "at this step" if at == step else (f"at step {at}, the latest before this checkpoint (it runs every "
                                             f"`train.eval_every={cfg.train.eval_every}` steps and at the last)")
    n = evaluation.get("eval/n")
    lines = [f"Greedy decoding, one completion per prompt, on {n} prompts of `{cfg.env.name}`'s test split, "
             f"{when}; the values as the run's `metrics.jsonl` logged them.", "",
             f"| metric (step {at}) | value |", "|---|---|"]
    return lines + [f"| `{k}` | {_value(v)} |" for k, v in evaluation.items() if k.startswith("eval/")]


def _command_lines(commands: list[dict]) -> list[str]:
    lines = ["```bash"]
    if not commands or commands[0]["step"] != 0:
        lines.append("# the command that started the run was not recorded (its checkpoints predate model cards)")
    for entry in commands:
        said = "# started the run" if entry["step"] == 0 else f"# resumed it from step {entry['step']}"
        ranks = entry.get("world_size", 1)
        lines.append(said + (f" under torchrun, {ranks} processes each running:" if ranks > 1 else ""))
        lines.append(entry["command"] or "# train(cfg), called from Python: no command line (see the config below)")
    return lines + ["```"]


def _use_lines(cfg, base_model: str | None, adapter: bool) -> list[str]:
    template = ("Its tokenizer's chat template renders the prompts" if cfg.model.prompt_format == "chat" else
                "Prompts are plain text (`model.prompt_format=plain`): each message's content and a blank line")
    if adapter:
        base = cfg.model.get("name_or_path") or base_model or "the base model"
        return ["```python", "from peft import PeftModel", "from transformers import AutoModelForCausalLM", "",
                f"base = AutoModelForCausalLM.from_pretrained({json.dumps(str(base))})",
                "model = PeftModel.from_pretrained(base, \"path/to/this/adapter\")", "```", "",
                "The folder above this one holds the same model merged, which loads without peft."]
    kind = f" model.kind={cfg.model.kind}"  # the environments' prompt for this model (base or instruct)
    plain = " model.prompt_format=plain" if cfg.model.prompt_format == "plain" else ""
    return ["```python", "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
            "model = AutoModelForCausalLM.from_pretrained(\"path/to/this/folder\")",
            "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/folder\")", "```", "",
            # rlvr eval reads the environment, prompt, reward and lengths from the folder's config itself
            # (trainer/evaluation/run_config.py): the command needs nothing of the run retyped
            f"{template}, as in training. With rlvr, `rlvr eval model.name_or_path=path/to/this/folder` scores "
            f"it again (pass@k, maj@k) on the task it was trained on: it reads the environment, prompt, reward and "
            f"lengths from `{CONFIG_FILE}` beside the weights (`env=NAME` or `env.KEY=V` on the command line "
            f"changes them), and `rlvr train model=hf model.name_or_path=path/to/this/folder{kind}{plain} "
            f"env={cfg.env.name}` starts a new run from it."]
