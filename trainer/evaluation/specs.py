"""What `rlvr eval` evaluates: the models (checkpoints, Hub names, run directories) and the environments
(names or mappings over their shipped conf/env YAML), each with a unique label for the reports, and
the rows each environment is evaluated on."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path

import torch
from omegaconf import OmegaConf

from rlvr.envs.split import TooFewTestProblems
from rlvr.envs.vf.env import PREFIX as VF_PREFIX
from rlvr.errors import ConfigError
from rlvr.trainer.env_config import build_env
from rlvr.trainer.models.gguf_import import resolve_gguf

_STEP_DIR = re.compile(r"^step_(\d+)$")


@dataclass(frozen=True)
class ModelSpec:
    path: str  # what from_pretrained loads
    label: str  # the name in reports
    step: int | None = None  # training step, when the path is a run's checkpoint
    run: str | None = None  # the run directory it belongs to (plots group by it)
    reward: str | None = None  # the run's reward.kind (env, or a control: random, format_only); None: not a run's


@dataclass(frozen=True)
class EnvSpec:
    label: str
    name: str
    split: str = "test"
    params: dict = field(default_factory=dict)


def model_specs(cfg) -> list[ModelSpec]:
    """`model.name_or_path` then `models`, a run directory expanded into its base model and checkpoints."""
    given = ([cfg.model.name_or_path] if cfg.model.name_or_path else []) + [str(m) for m in cfg.models]
    if not given:
        raise ConfigError("no model to evaluate: give model.name_or_path=DIR or 'models=[DIR_A,DIR_B]'")
    specs = []
    for entry in given:
        path = Path(entry)
        if (path / "checkpoints").is_dir():
            specs.extend(_run_models(path))
        elif _STEP_DIR.match(path.name) and path.parent.name == "checkpoints":
            run = path.parent.parent
            specs.append(ModelSpec(entry, f"{run.name}/{path.name}", int(path.name[5:]), str(run), run_reward(run)))
        else:  # a .gguf file or a packaged model (smollm2) is converted once into the cache
            specs.append(ModelSpec(resolve_gguf(entry), entry))
    return _unique_labels(specs, ModelSpec)


def _run_models(run: Path) -> list[ModelSpec]:
    steps = sorted((int(p.name[5:]), p) for p in (run / "checkpoints").iterdir()
                   if _STEP_DIR.match(p.name) and (p / "config.json").exists())
    if not steps:
        raise ConfigError(f"models: run directory {run} has no checkpoints/step_N with a saved model")
    specs = []
    state = steps[0][1] / "trainer_state.pt"
    if state.exists():
        from rlvr.trainer.checkpoint import saved_entries  # its base_model read back as this machine's path

        base = saved_entries(steps[0][1], "base_model").get("base_model")
        if base:
            specs.append(ModelSpec(str(base), f"{run.name}/base", 0, str(run)))
    reward = run_reward(run)
    return specs + [ModelSpec(str(p), f"{run.name}/step_{s}", s, str(run), reward) for s, p in steps]


def run_reward(run: Path) -> str | None:
    """`reward.kind` of the training run in `run` (its config.yaml); "env" for runs older than reward.*,
    None when the directory has no config.yaml."""
    path = run / "config.yaml"
    if not path.is_file():
        return None
    return str(OmegaConf.select(OmegaConf.load(path), "reward.kind", default="env"))


def env_specs_of(cfg) -> list[EnvSpec]:
    """`envs` (names or mappings, each over its shipped conf/env YAML) when not empty, else `env`."""
    entries = list(OmegaConf.to_container(cfg.envs, resolve=True)) or [OmegaConf.to_container(cfg.env, resolve=True)]
    specs = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict) or not entry.get("name"):
            raise ConfigError(f"envs[{i}] must be an env name or a mapping with 'name', got {entry!r}")
        label = entry["name"]
        if label.startswith(VF_PREFIX):  # envs=[vf:NAME]: the verifiers taskset NAME (envs/vf/env.py)
            entry = {**entry, "name": "vf", "taskset": label[len(VF_PREFIX):]}
        elif entry["name"] == "vf" and entry.get("taskset"):
            label = f"{VF_PREFIX}{entry['taskset']}"
        params = {**_shipped_env(entry["name"], cfg.model.kind), **entry}
        name, split = params.pop("name"), params.pop("split", "test")
        specs.append(EnvSpec(label, name, split, params))
    return _unique_labels(specs, EnvSpec)


def _shipped_env(name: str, model_kind: str) -> dict:
    """conf/env/NAME.yaml's keys, its `prompt` following `model.kind` as in `rlvr train`."""
    path = files("rlvr.conf").joinpath("env", f"{name}.yaml")
    if not path.is_file():
        return {}
    node = OmegaConf.create({"model": {"kind": model_kind}, "env": OmegaConf.create(path.read_text())})
    return OmegaConf.to_container(node.env, resolve=True)


def _unique_labels(specs, kind):
    labels = [s.label for s in specs]
    return [kind(**{**asdict(s), "label": f"{s.label}#{i}"}) if labels.count(s.label) > 1 else s
            for i, s in enumerate(specs)]


def build_spec_env(spec: EnvSpec):
    return build_env(OmegaConf.create({"name": spec.name, **spec.params}))


def select_rows(env, spec: EnvSpec, n_prompts: int | None, seed: int, log=print) -> list[dict]:
    """`n_prompts` distinct rows of the spec's split (None: all of a finite one). A test split smaller than that is
    taken whole, with a line saying so, as `rlvr train` caps `train.eval_prompts`: its size is the env's
    `test_size()` where it counts them (HumanEval's 164, guess_number's secrets), else what the draw finds."""
    where = f"{spec.label}: n_prompts={n_prompts}, split={spec.split}"
    try:
        finite = env.test_size() if spec.split == "test" else getattr(env, "num_rows", None)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    if n_prompts is None and finite is None:
        raise ConfigError(f"n_prompts=null (every row) needs an env of fixed size; {spec.name} is procedural")
    if finite == 0:
        raise ConfigError(f"{where}: the split has no problems for these parameters")
    n = finite if n_prompts is None else min(n_prompts, finite) if finite is not None else n_prompts
    if n_prompts is not None and n < n_prompts:
        log(f"{spec.label}: n_prompts={n_prompts}: it has {n} {spec.split} problems; evaluating all {n}")
    try:
        rows = env.rows(spec.split, n, seed=seed)
    except TooFewTestProblems as error:  # a procedural task that does not count its test problems
        log(f"{spec.label}: n_prompts={n_prompts}: only {error.available} distinct {spec.split} problems exist for "
            f"these parameters; evaluating all {error.available}")
        if not error.available:
            raise ConfigError(f"{where}: the split has no problems for these parameters") from None
        rows = env.rows(spec.split, error.available, seed=seed)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{spec.label}: split {spec.split!r} repeats prompt ids; evaluate on a split of distinct rows")
    return rows
