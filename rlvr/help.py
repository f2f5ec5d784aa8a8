"""`rlvr train|eval|verify --help`: each key with its default and one-line meaning, grouped by what a user changes.

A key's meaning is the first line of its field's docstring in the command's schema (trainer/config.py
`RunConfig`, trainer/evaluation/eval_config.py `EvalConfig`, verifiers/batch.py `VerifyConfig`), read here
from the source with `ast` (`field_docs`): that string is the one place a key is described, for this help
and for any reference page generated from the schema. An environment's keys are its YAML's
(conf/env/NAME.yaml) and their comments. The defaults shown are the composed config's, so
`rlvr train --help model=smollm2 algo=dapo` shows what those presets set.

What is here and nowhere else is the grouping (`TRAIN`, `EVAL`, `VERIFY`): sections in the order a user
changes things, the keys each shows by default (`keys`) and those it shows under `--help all` or
`--help TOPIC` (`more`). A pattern `PREFIX.*` takes every key under PREFIX not taken by an earlier pattern.

A key whose field carries a rule (trainer/field_rules.py: `rule(ge=1)`, `rule(choices=...)`) shows it after its
default, `train.steps=200 (>= 1)`, `(one of: constant, linear, cosine)`: the rule the run checks, read from the same
field. A set of choices that the meaning's line already names, each of them, is not repeated (`base | instruct: ...`).
A key no pattern takes is listed under "Other" (tests/rlvr/test_help.py fails then: place it), and the keys
that a group option sets (`algo.name`: `algo=NAME`) or that the command never reads (`HIDDEN`) are not listed.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from typing import Any

WIDTH = 110  # the widest line printed
COLUMN = 38  # where the meaning starts after `  key=default`
INTERNAL_GROUPS = ("algo_schema", "hydra")  # schema plumbing and Hydra's own: not choices a user makes
GROUP_ORDER = ("env", "model", "algo", "rollout", "reward", "train")  # what to train first, then how
GROUP_KEYS = {"algo": "algo.name", "env": "env", "model": "model.name", "rollout": "rollout.engine",
              "reward": "reward.kind"}  # the key each group option sets: shown as the choice, not as a key
DYNAMIC = "env"  # an open mapping whose keys are the chosen environment's (its YAML), not the schema's


@dataclass(frozen=True)
class Section:
    title: str
    topic: str  # `--help TOPIC`
    keys: tuple[str, ...] = ()  # shown by `--help`
    more: tuple[str, ...] = ()  # shown by `--help all` and `--help TOPIC`


TRAIN = (
    Section("What to train", "what", ("model.name_or_path", "model.kind", "env.*"),
            ("model.prompt_format", "data", "reward.*")),
    Section("Algorithm", "algo", ("algo.*",)),
    Section("Rollout / sampling", "sampling",
            ("rollout.max_new_tokens", "rollout.temperature", "rollout.top_p", "rollout.top_k", "rollout.stop"),
            ("rollout.min_p", "rollout.repetition_penalty", "rollout.generation_kwargs", "rollout.truncated_reward",
             "rollout.importance_cap", "rollout.seed_per_prompt", "rollout.hf.prefill_once")),
    Section("Batch and optimisation", "optim",
            ("train.prompts_per_step", "train.completions_per_prompt", "train.micro_batch_size", "optim.lr",
             "optim.warmup_steps", "optim.schedule", "model.lora.r"), ("optim.*", "model.lora.*")),
    Section("Run: length, eval, checkpoints, logging", "run",
            ("train.steps", "train.eval_every", "train.eval_prompts", "train.save_every", "seed", "output_dir",
             "resume", "logger"), ("overwrite", "train.logged_prompts_per_step", "wandb.*", "train.push_to_hub",
                                   "train.hub_model_id", "train.hub_private_repo")),
    Section("Curriculum", "curriculum", more=("curriculum.*",)),
    Section("Memory, devices, processes", "memory",
            more=("train.device", "train.logprob_chunk_tokens", "train.max_tokens_per_micro_batch",
                  "train.pack_sequences", "model.gradient_checkpointing", "model.autocast", "threads",
                  "trainer.strategy")),
    Section("vLLM (rollout=vllm|server)", "vllm",
            more=("rollout.vllm.gpu_memory_utilization", "rollout.vllm.tensor_parallel_size",
                  "rollout.vllm.enable_sleep_mode", "rollout.vllm.dtype", "rollout.vllm.kv_cache_bytes",
                  "rollout.vllm.lora_sync")),
    Section("Rollout servers (rollout=server)", "server",
            more=("rollout.server.endpoints", "rollout.server.num_servers", "rollout.server.request_timeout_s",
                  "rollout.server.start_timeout_s", "rollout.server.threads", "rollout.server.weights_dir")),
    Section("Asynchronous rollouts", "async",
            more=("rollout.max_staleness", "rollout.async_timeout_s", "rollout.hf.producer")),
    Section("The tiny model (model=tiny)", "tiny", more=("model.arch.*", "model.warm_start.*")),
    Section("Code sandboxes", "sandbox", more=("sandbox.*",)),
)

EVAL = (
    Section("What to evaluate", "what", ("model.name_or_path", "models", "model.kind", "env.*", "envs", "n_prompts"),
            ("model.prompt_format",)),
    Section("Sampling", "sampling",
            ("n_samples", "temperature", "top_p", "top_k", "rollout.max_new_tokens", "rollout.stop", "seed"),
            ("rollout.min_p", "rollout.repetition_penalty", "rollout.generation_kwargs", "rollout.truncated_reward")),
    Section("Output", "output", ("output_dir",), ("plots",)),
    Section("A running server instead of a local model", "endpoint", ("endpoint",),
            ("served_model", "request_timeout_s")),
    Section("Speed and engine", "engine",
            more=("batch_prompts", "threads", "rollout.hf.prefill_once", "rollout.vllm.gpu_memory_utilization",
                  "rollout.vllm.tensor_parallel_size", "rollout.vllm.dtype", "rollout.vllm.kv_cache_bytes")),
    Section("Rollout servers (rollout=server)", "server",
            more=("rollout.server.endpoints", "rollout.server.num_servers", "rollout.server.request_timeout_s",
                  "rollout.server.start_timeout_s", "rollout.server.threads", "rollout.server.weights_dir")),
    Section("Code sandboxes", "sandbox", more=("sandbox.*",)),
)

VERIFY = (
    Section("Records and scoring", "records", ("input", "output", "verifier", "workers", "params")),
    Section("Code sandboxes", "sandbox", ("sandbox.*",)),
)

SECTIONS = {"train": TRAIN, "eval": EVAL, "verify": VERIFY}
HIDDEN = {  # schema keys the command never reads
    "train": (),
    # rollout.temperature, top_p, top_k follow the top-level keys (setting them is refused); the rest are training's
    "eval": ("rollout.temperature", "rollout.top_p", "rollout.top_k", "rollout.importance_cap",
             "rollout.seed_per_prompt", "rollout.vllm.enable_sleep_mode", "rollout.vllm.lora_sync",
             "rollout.max_staleness", "rollout.async_timeout_s", "rollout.hf.producer"),
    "verify": (),
}


def schema_of(command: str) -> type:
    """The dataclass `command`'s config is checked against."""
    if command == "train":
        from rlvr.trainer.config import RunConfig

        return RunConfig
    if command == "eval":
        from rlvr.trainer.evaluation.eval_config import EvalConfig

        return EvalConfig
    from rlvr.verifiers.batch import VerifyConfig

    return VerifyConfig


@cache
def field_docs(cls: type) -> dict[str, str]:
    """{field: its docstring} for dataclass `cls`: the string literal right under each field, a subclass's over
    its bases'. Fields without one are absent."""
    docs: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if is_dataclass(k)]):
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError):  # no source installed: the keys are still listed, without their meaning
            continue
        for node, after in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                    and isinstance(after.value.value, str):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def schema_keys(cls: type, prefix: str = "", swap: dict[str, type] | None = None) -> list[tuple[str, str]]:
    """(dotted key, docstring or "") for every leaf of dataclass `cls`, in field order; `swap` replaces the
    dataclass of a key (`{"algo": PPOConfig}`: the chosen family's schema for the declared AlgoSchema)."""
    docs, keys = field_docs(cls), []
    for f in fields(cls):
        key = prefix + f.name
        kind = (swap or {}).get(key) or (f.default_factory if is_dataclass(f.default_factory) else None)
        if kind is not None:
            keys += schema_keys(kind, key + ".", swap)
        else:
            keys.append((key, docs.get(f.name, "")))
    return keys


def schema_rules(cls: type, prefix: str = "", swap: dict[str, type] | None = None) -> dict[str, tuple[Any, bool]]:
    """{dotted key: (its field's Rule, whether null is allowed)} for the leaves of `cls` that carry one; `swap` as in
    `schema_keys`."""
    from rlvr.trainer.field_rules import is_optional, rule_of

    found = {}
    for f in fields(cls):
        key = prefix + f.name
        kind = (swap or {}).get(key) or (f.default_factory if is_dataclass(f.default_factory) else None)
        if kind is not None:
            found.update(schema_rules(kind, key + ".", swap))
        elif rule_of(f) is not None:
            found[key] = (rule_of(f), is_optional(f))
    return found


def rule_text(rule, nullable: bool, meaning: str) -> str:
    """The rule as --help prints it after `meaning`, or "" for choices the meaning already names, each of them."""
    if rule.choices is not None and all(re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", meaning)
                                        for c in rule.choices):
        return ""
    return rule.shows(nullable)


def one_line(doc: str) -> str:
    """A docstring's first line, as --help prints it (without its full stop)."""
    line = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    return line[:-1] if line.endswith(".") and not line.endswith("..") else line


def user_keys(command: str, cfg) -> list[tuple[str, str]]:
    """(key, docstring) of each schema key the user sets as `key=value` for this config: the chosen algorithm's
    keys it reads (trainer/algo_keys.py), without group-set and `HIDDEN` keys, and without the open env mapping."""
    swap, unread = {}, set()
    if command == "train":
        from rlvr.trainer.algo_keys import schema_of as algo_schema
        from rlvr.trainer.algos.table import ALGORITHMS

        swap = {"algo": algo_schema(cfg.algo.name)}
        unread = {f"algo.{key}" for key in ALGORITHMS[cfg.algo.name].unread}
    skip = {*GROUP_KEYS.values(), *HIDDEN[command], *unread, DYNAMIC}
    return [(key, doc) for key, doc in schema_keys(schema_of(command), swap=swap) if key not in skip]


def env_keys(cfg, command: str) -> list[tuple[str, str]]:
    """(env.KEY, its YAML comment or "") for the chosen environment's keys; a plugin's without comments."""
    from importlib.resources import files

    name = cfg.env.get("name")
    notes: dict[str, str] = {}
    path = files("rlvr.conf").joinpath("env", f"{name}.yaml")
    if path.is_file():
        notes = yaml_comments(path.read_text())
    notes.update({k[len("env."):]: v for k, v in yaml_comments(files("rlvr.conf").joinpath(f"{command}.yaml")
                                                               .read_text()).items() if k.startswith("env.")})
    return [(f"env.{key}", notes.get(key, "")) for key in cfg.env if key != "name"]


def yaml_comments(text: str) -> dict[str, str]:
    """{dotted key: its comment} in a YAML file of `key: value  # comment` lines, a comment block right above a key
    counting as its comment when the line has none."""
    notes, stack, above = {}, [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"^(\s*)([A-Za-z_][\w]*):(.*)$", line)
        if not match:
            above = []
            continue
        indent = len(match[1])
        stack = [(i, k) for i, k in stack if i < indent] + [(indent, match[2])]
        trailing = match[3].split("  #", 1)[1].strip() if "  #" in match[3] else ""
        notes[".".join(k for _, k in stack)] = trailing or " ".join(above)
        above = []
    return notes


def show(value: Any) -> str:
    """A default as the user would type it after `key=`, shortened past 40 characters."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, list):
        text = "[" + ",".join(show(v) for v in value) + "]"
    elif isinstance(value, dict):
        text = "{" + ",".join(f"{k}:{show(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, str):
        text = (value or "''").replace("\n", "\\n")
    else:
        text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def default_of(cfg, key: str) -> str:
    """`key`'s composed value, resolved; an output directory's `${now:...}` as <date>/<time>."""
    from omegaconf import OmegaConf

    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if node is not None and OmegaConf.is_missing(node, leaf):
        return "???"  # Hydra's mark for a value the command needs
    raw = OmegaConf.to_container(node, resolve=False)[leaf] if node is not None else None
    if isinstance(raw, str) and "${now:" in raw:
        return re.sub(r"\$\{now:([^}]*)\}", lambda m: {"%Y-%m-%d": "<date>", "%H-%M-%S": "<time>"}.get(m[1], "<now>"),
                      raw)
    try:
        return show(OmegaConf.select(cfg, key, throw_on_resolution_failure=True))
    except Exception:  # noqa: BLE001 - a resolver that fails here fails at the run, naming itself; show the text
        return show(raw)


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def _matches(pattern: str, key: str) -> bool:
    return key.startswith(pattern[:-1]) if pattern.endswith(".*") else key == pattern


def placed(sections: tuple[Section, ...], keys: list[str]) -> dict[str, tuple[Section, bool]]:
    """{key: (its section, whether `--help` shows it)}: the first pattern that matches it, in table order."""
    order = [(s, p, True) for s in sections for p in s.keys] + [(s, p, False) for s in sections for p in s.more]
    out = {}
    for key in keys:
        hit = next(((s, brief) for s, p, brief in order if _matches(p, key)), None)
        if hit is not None:
            out[key] = hit
    return out


@dataclass(frozen=True)
class Row:
    section: str
    key: str
    default: str
    meaning: str
    brief: bool  # shown by `--help` (without a topic)
    rule: str = ""  # the field's rule, `(>= 1)` (trainer/field_rules.py); "" when it has none or the meaning says it


def rows(command: str, cfg) -> list[Row]:
    """Every key the command's help lists for composed config `cfg`, in section order then table order."""
    sections = SECTIONS[command]
    listed = user_keys(command, cfg) + (env_keys(cfg, command) if DYNAMIC in cfg else [])
    where = placed(sections, [k for k, _ in listed])
    other = (Section("Other", "other"), False)  # a key no pattern takes (tests/rlvr/test_help.py fails on it)
    rules = schema_rules(schema_of(command), swap=_chosen_algo(command, cfg))
    made = [Row(where.get(k, other)[0].title, k, default_of(cfg, k), one_line(doc), where.get(k, other)[1],
                rule_text(*rules[k], one_line(doc)) if k in rules else "")
            for k, doc in listed]
    rank = {s.title: i for i, s in enumerate(sections)}
    patterns = {s.title: [*s.keys, *s.more] for s in sections}

    def position(row: Row) -> tuple[int, int]:
        index = next((i for i, p in enumerate(patterns.get(row.section, [])) if _matches(p, row.key)), 0)
        return rank.get(row.section, len(sections)), index

    return sorted(made, key=position)  # stable: schema order within a pattern


def _chosen_algo(command: str, cfg) -> dict[str, type]:
    """`rlvr train`: {"algo": the composed algo section's schema}, the chosen family's dataclass (read off the
    composed node: no import of the algorithm table)."""
    from omegaconf import OmegaConf

    kind = OmegaConf.get_type(cfg.algo) if command == "train" and "algo" in cfg else None
    return {"algo": kind} if kind is not None and is_dataclass(kind) else {}


def _line(left: str, meaning: str) -> list[str]:
    """`left` then `meaning` from COLUMN (or after two spaces when `left` is wider), wrapped at WIDTH."""
    if not meaning:
        return [left]
    start = COLUMN if len(left) <= COLUMN - 2 else len(left) + 2
    indent = " " * COLUMN
    if start + min(len(meaning), 30) > WIDTH:  # no room beside it: the meaning on the lines below
        return [left, *textwrap.wrap(meaning, WIDTH, initial_indent=indent, subsequent_indent=indent)]
    first, *rest = textwrap.wrap(meaning, WIDTH - start)
    return [left.ljust(start) + first,
            *textwrap.wrap(" ".join(rest), WIDTH, initial_indent=indent, subsequent_indent=indent)]


def _choices(cfg, loader) -> list[str]:
    """One line per config group the command composes (its defaults list), with the chosen option first."""
    chosen = cfg.hydra.runtime.choices
    groups = [g for g in chosen if "/" not in g and g not in INTERNAL_GROUPS]  # train=null: no preset chosen
    groups.sort(key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g))
    if not groups:
        return []
    lines = ["Choices (group=option; each option is a preset of the keys below):"]
    for group in groups:
        options = loader.get_group_options(group)
        shown = ", ".join(o for o in options if not (group == "env" and o == "vf"))
        if group == "env" and "vf" in options:
            shown += "; vf:NAME (a verifiers taskset); `rlvr envs` describes each"
        lines += _line(f"  {group}={chosen[group] or 'null'}", shown)
    return lines + [""]


def render(command: str, cfg, listed: list[Row], choices: list[str], topics: list[str], env_given: bool) -> str:
    """The help text: header, choices, sections (brief, or the topics'), a pointer to the rest, footer."""
    sections = SECTIONS[command]
    everything = "all" in topics
    wanted = [t for t in topics if t != "all"]

    def shown(row: Row) -> bool:
        if everything:
            return True
        if wanted:
            return any(row.section == s.title for s in sections if s.topic in wanted) \
                or any(_under(row.key, t) for t in wanted)
        return row.brief and not (row.key.startswith("env.") and not env_given)

    header = str(cfg.hydra.help.header).rstrip()
    groups = "[group=option ...] " if choices else ""
    out = [header, f"usage: rlvr {command} {groups}[key=value ...]", ""]
    if not wanted:
        out += choices
    for title in dict.fromkeys(r.section for r in listed):
        mine = [r for r in listed if r.section == title and shown(r)]
        env_line = _env_line(cfg) if DYNAMIC in cfg and title == sections[0].title \
            and not (everything or wanted or env_given) else []
        if not mine and not env_line:
            continue
        algo = f" (algo={cfg.algo.name})" if command == "train" and title == "Algorithm" else ""
        out.append(title + algo)
        for row in mine:
            out += _line(f"  {row.key}={row.default}" + (f" {row.rule}" if row.rule else ""), row.meaning)
        out += env_line
        out.append("")
    if not (everything or wanted):
        out += _rest(command, sections, listed, shown)
    out += [str(cfg.hydra.help.footer).rstrip(), *_more(command, sections, _example_prefixes(listed), bool(groups))]
    return "\n".join(line.rstrip() for line in out).strip("\n") + "\n"


def _env_line(cfg) -> list[str]:
    """The chosen environment's keys as `key=value`, wrapped: `--help env=NAME` describes each."""
    from omegaconf import OmegaConf

    name = cfg.env.get("name")
    pairs = " ".join(f"{k}={default_of(cfg, f'env.{k}')}" for k in OmegaConf.to_container(cfg.env) if k != "name")
    text = f"env.* of env={name}: {pairs}"
    return textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="    ")


def _rest(command: str, sections: tuple[Section, ...], listed: list[Row], shown) -> list[str]:
    hidden = [r for r in listed if not shown(r) and not r.key.startswith("env.")]
    if not hidden:
        return []
    counts = {s.topic: sum(r.section == s.title for r in hidden) for s in sections}
    parts = ", ".join(f"{topic} ({n})" for topic, n in counts.items() if n)
    text = f"{len(hidden)} more keys: rlvr {command} --help all, or --help TOPIC for one of {parts}"
    return [*textwrap.wrap(text, WIDTH), ""]


def _example_prefixes(listed: list[Row]) -> list[str]:
    """For `--help PREFIX`: the first nested section (model.lora) and the largest other one (rollout)."""
    keys = [r.key for r in listed if "." in r.key and not r.key.startswith("env.")]
    nested = [k.rsplit(".", 1)[0] for k in keys if k.count(".") > 1][:1]
    tops = [k.split(".")[0] for k in keys if not any(_under(k, n.split(".")[0]) for n in nested)]
    return ([max(tops, key=tops.count)] if tops else []) + nested


def _more(command: str, sections: tuple[Section, ...], prefixes: list[str], groups: bool) -> list[str]:
    lines = [f"rlvr {command} --help all: every key | --help TOPIC ({', '.join(s.topic for s in sections)}) "
             f"or a key prefix (e.g. {', '.join(prefixes)}): one part"]
    if groups:
        lines.append(f"rlvr {command} --help env=countdown: that environment's keys (any group=option or key=value "
                     f"shows its defaults)")
    lines.append("--hydra-help: Hydra's own flags (--cfg job prints the composed config)")
    return [line for text in lines for line in textwrap.wrap(text, WIDTH, subsequent_indent="  ")]


def help_text(command: str, args: list[str]) -> str:
    """`rlvr COMMAND --help [TOPIC ...] [overrides ...]`: TOPIC is `all`, a section's topic or a key prefix."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    topics = [a for a in args if "=" not in a and not a.startswith("-")]
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        cfg = compose(config_name=command, overrides=overrides, return_hydra_config=True)
        listed = rows(command, cfg)
        known = {"all", *(s.topic for s in SECTIONS[command])}
        unknown = [t for t in topics if t not in known and not any(_under(r.key, t) for r in listed)]
        if unknown:
            raise ValueError(f"--help {' '.join(unknown)}: not a topic; choose all, "
                             f"{', '.join(s.topic for s in SECTIONS[command])}, or a key prefix such as "
                             f"{', '.join(_example_prefixes(listed))}")
        env_given = any(_under(o.lstrip("+~").split("=", 1)[0], "env") for o in overrides) \
            or any(_under(t, "env") for t in topics)
        return render(command, cfg, listed, _choices(cfg, GlobalHydra.instance().config_loader()), topics,
                      env_given)
