"""What `rlvr eval` takes from the training run of the models it evaluates.

A run directory (`models=[RUN]`) or a checkpoint (`model.name_or_path=RUN/checkpoints/step_N`, or any folder
holding the `rlvr_config.yaml` every checkpoint carries, trainer/model_card.py) was trained on an environment
with a prompt, a reward and a length; evaluating it on eval's defaults (arithmetic, the base prompt, 16 tokens)
printed a confident table of the wrong task. So the run's config supplies, unless the command line sets them:

- `env`: the whole environment mapping (name, files, columns, reward, prompt, system prompt, ...). `env=NAME` or
  `envs=[...]` on the command line replaces it; `env.KEY=V` alone changes that key of the run's environment.
  `env.split` stays eval's (default test): the split is what eval measures, not how the run trained.
- `model.kind` (the prompt style of the built-in environments), `model.prompt_format` (chat template or plain
  text: a run's checkpoints carry its tokenizer's template, the base model beside them does not),
  `rollout.max_new_tokens`, `rollout.truncated_reward` and `rollout.stop`: how the run generated and what a cut
  completion earned; `rollout.repetition_penalty`, `rollout.min_p` and `rollout.generation_kwargs`, which the
  run's own held-out eval decoded with (trainer/rollout/generation_settings.py).

Sampling (`temperature`, `top_p`, `top_k`) stays eval's own: its default is greedy, the trainer's held-out eval.

Models of several runs that differ in any of these are refused with one line naming the runs, the key and
both values, unless the command line sets that key: an `rlvr eval` reports every model on the same
environments, and a model quietly scored on another run's task would read as a result. "Set on the command
line" is read from the overrides themselves, not from values: `model.kind=base` over an instruct run wins
although base is eval's default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rlvr.errors import ConfigError

CHECKPOINT_CONFIG = "rlvr_config.yaml"  # trainer/model_card.py's CONFIG_FILE; not imported: eval sits below it
RUN_CONFIG = "config.yaml"  # a run directory's (trainer/run_dir.py)
TAKEN_KEYS = ("model.kind", "model.prompt_format", "rollout.max_new_tokens", "rollout.truncated_reward", "rollout.stop",
              "rollout.repetition_penalty", "rollout.min_p", "rollout.generation_kwargs")


@dataclass
class FromRun:
    """What the run's config gave (`taken`, dotted key -> value) and what the command line set over it."""

    configs: list[str]
    taken: dict = field(default_factory=dict)
    overridden: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The block `rlvr eval` prints before it starts."""
        where = ", ".join(self.configs)
        out = [f"rlvr eval: from the run's config ({where}), unless set on the command line:"]
        out += [f"  {key}={_show(value)}" for key, value in self.taken.items()]
        if self.overridden:
            out.append("rlvr eval: set on the command line instead of the run's:")
            out += [f"  {key}={_show(value)}" for key, value in self.overridden.items()]
        return out

    def to_json(self) -> dict:
        return {"configs": self.configs, "taken": self.taken, "overridden": self.overridden}


def run_config_path(entry: str) -> Path | None:
    """The training config of a model entry: a run directory's config.yaml; a checkpoint's rlvr_config.yaml,
    else its run's config.yaml (RUN/checkpoints/step_N); None for a model that is no run's (a Hub name, a file)."""
    path = Path(entry)
    if (path / "checkpoints").is_dir():
        return path / RUN_CONFIG if (path / RUN_CONFIG).is_file() else None
    if (path / CHECKPOINT_CONFIG).is_file():
        return path / CHECKPOINT_CONFIG
    if path.parent.name == "checkpoints" and (path.parent.parent / RUN_CONFIG).is_file():
        return path.parent.parent / RUN_CONFIG
    return None


def _load(path: Path):
    """A run's config; a checkpoint's has its machine paths as tokens (trainer/share_paths.py): read back here."""
    if path.name != CHECKPOINT_CONFIG:
        return OmegaConf.load(path)
    from rlvr.trainer.share_paths import local_text

    return OmegaConf.create(local_text(path.read_text(), path.parent.parent.parent))


def override_keys(overrides: list[str]) -> list[str]:
    """The config keys the command line sets, e.g. `env`, `env.columns.answer`, `rollout.max_new_tokens`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return [o.key_or_group for o in OverridesParser.create().parse_overrides(list(overrides))]


def adopt_run_config(cfg: DictConfig, overrides: list[str] | None) -> FromRun | None:
    """Set in `cfg` what the models' training run(s) used (module docstring), keeping the keys the command
    line's `overrides` set (`command_keys`; None: the keys whose values differ from conf/eval.yaml's).
    Returns what it took and what the command line overrode; None when no model is a run's."""
    entries = ([cfg.model.name_or_path] if cfg.model.name_or_path else []) + [str(m) for m in cfg.models]
    paths = list(dict.fromkeys(p for p in map(run_config_path, entries) if p is not None))
    if not paths:
        return None
    runs = {str(p): OmegaConf.to_container(_load(p), resolve=False) for p in paths}
    keys = command_keys(cfg, overrides)
    from_run = FromRun(list(runs))

    if any(k in ("env", "envs") for k in keys) or cfg.envs:  # an environment of the command line's own
        from_run.overridden["env" if "envs" not in keys else "envs"] = \
            OmegaConf.to_container(cfg.envs if cfg.envs else cfg.env, resolve=True)
    else:
        env = _one_value(runs, "env")
        if not isinstance(env, dict) or not env.get("name"):
            raise ConfigError(f"{paths[0]}: the run's config has no env.name; give the environment: env=NAME")
        env = OmegaConf.create(env)
        for key in keys:  # env.KEY=V over the run's environment
            if key.startswith("env.") and key != "env.split":
                OmegaConf.update(env, key[4:], OmegaConf.select(cfg, key), merge=True)
                from_run.overridden[key] = _plain(OmegaConf.select(cfg, key))
        env.split = cfg.env.split
        from_run.taken.update({f"env.{k}": v for k, v in _flat(OmegaConf.to_container(env)).items()
                               if f"env.{k}" not in from_run.overridden and k != "split"})
        cfg.env = env
    for key in TAKEN_KEYS:
        if key in keys:
            from_run.overridden[key] = _plain(OmegaConf.select(cfg, key))
            continue
        value = _one_value(runs, key)
        if value is not None:
            OmegaConf.update(cfg, key, value, merge=False)
            from_run.taken[key] = value
    return from_run


def _one_value(runs: dict[str, dict], key: str):
    """The value at `key` in every run's config: one value, or a ConfigError naming both runs and values."""
    values = {path: _plain(OmegaConf.select(OmegaConf.create(config), key, default=None))
              for path, config in runs.items()}
    first_path, first = next(iter(values.items()))
    for path, value in values.items():
        if value != first:
            what = _difference(first, value) if key == "env" else f"{key}={_show(first)} vs {key}={_show(value)}"
            raise ConfigError(f"the models come from runs with different {key}: {first_path} and {path} ({what}); "
                              f"evaluate each run on its own (one rlvr eval each), or set {key}=... for all")
    return first


def _difference(a: dict, b: dict) -> str:
    """The first env key where two runs' environments differ, both sides named: env=dataset vs env=arithmetic."""
    if a.get("name") != b.get("name"):
        return f"env={a.get('name')} vs env={b.get('name')}"
    fa, fb = _flat(a), _flat(b)
    key = next(k for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k))
    return f"env={a['name']} with env.{key}={_show(fa.get(key))} vs env.{key}={_show(fb.get(key))}"


def _flat(mapping: dict, prefix: str = "") -> dict:
    """{dotted key: value} of a nested mapping; lists stay whole (env.reward is one value)."""
    out = {}
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def command_keys(cfg: DictConfig, overrides: list[str] | None) -> list[str]:
    """The keys this `rlvr eval` sets: those of `overrides` (rlvr/cli.py and rlvr/api.py pass the command's); for
    a config composed in Python and handed to `run_eval` without them, the keys whose values differ from
    conf/eval.yaml's (`env` when the env's name does), which cannot tell a default typed out from one left alone."""
    if overrides is not None:
        return override_keys(overrides)
    from rlvr.trainer.evaluation.eval_config import compose_eval_config

    default = OmegaConf.to_container(compose_eval_config([]), resolve=False)
    given = OmegaConf.to_container(cfg, resolve=False)
    keys = set()
    if given["env"].get("name") != default["env"].get("name"):
        keys.add("env")
        given.pop("env"), default.pop("env")
    mine, theirs = _flat(given), _flat(default)
    return sorted(keys | {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)})


def _plain(value):
    """A config value as plain Python (lists and mappings too)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)
