"""`rlvr train|eval|verify --help` (rlvr/help.py) and the verifiers tasksets `rlvr envs` lists.

The help reads each key's meaning from the string under its field in the schema, so these tests fail when a
field has none, when a key is listed twice or not at all, when a section's pattern no longer matches any key
(a key renamed), and when the default view no longer fits a screen. The keys expected are walked here from the
dataclasses directly, not through rlvr/help.py."""

import os
import textwrap
from dataclasses import fields, is_dataclass

import pytest
from omegaconf import OmegaConf

from rlvr.cli import main
from rlvr.help import COLUMN, HIDDEN, SECTIONS, WIDTH, _matches, field_docs, one_line, rows
from rlvr.trainer.algo_keys import schema_of
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.config import ALGO_SCHEMAS, RunConfig
from rlvr.trainer.evaluation.eval_config import EvalConfig
from rlvr.verifiers.batch import VerifyConfig
from tests.cli_run import run_rlvr

SET_BY_A_GROUP = {"algo.name", "model.name", "rollout.engine", "reward.kind", "env"}  # shown as group=option


def leaves(cls, prefix="", swap=None):
    """(dotted key, declaring dataclass, field name) for each leaf of `cls`; `swap`: {key: dataclass}."""
    for f in fields(cls):
        key = prefix + f.name
        kind = (swap or {}).get(key) or (f.default_factory if is_dataclass(f.default_factory) else None)
        if kind is not None:
            yield from leaves(kind, key + ".", swap)
        else:
            yield key, cls, f.name


def expected_keys(command, algo="grpo"):
    if command == "train":
        keys = [k for k, *_ in leaves(RunConfig, swap={"algo": schema_of(algo)})]
        return [k for k in keys if k not in SET_BY_A_GROUP and k.removeprefix("algo.") not in ALGORITHMS[algo].unread]
    schema = EvalConfig if command == "eval" else VerifyConfig
    return [k for k, *_ in leaves(schema) if k not in SET_BY_A_GROUP and k not in HIDDEN[command]]


def help_of(capsys, command, *args):
    assert main([command, "--help", *args]) == 0
    return capsys.readouterr().out


def compose(command, overrides):
    from hydra import compose as hydra_compose, initialize_config_module

    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry
    from rlvr.trainer.config import register_schemas
    from rlvr.trainer.evaluation.eval_config import register_eval_schema
    from rlvr.verifiers.batch import register_schema
    from hydra.core.config_store import ConfigStore

    {"train": register_schemas, "eval": register_eval_schema, "verify": register_schema}[command]()
    offer_plugin_envs(ConfigStore.instance(), env_registry)
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        return hydra_compose(config_name=command, overrides=overrides)


def shown(value):
    """A scalar default as the help writes it (what a user types after `key=`)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def test_every_schema_field_says_what_it_means():
    """The string under a field is its help: a field added without one fails here, naming it."""
    missing = []
    for root in (RunConfig, EvalConfig, VerifyConfig, *ALGO_SCHEMAS.values()):
        for key, cls, name in leaves(root):
            if not one_line(field_docs(cls).get(name, "")):
                missing.append(f"{cls.__name__}.{name} ({key})")
    assert not missing, f"write a docstring under each of these fields (its first line is its --help): {missing}"


def _check_listed_once(text, cfg, keys):
    lines = text.splitlines()
    for key in keys:
        hits = [i for i, line in enumerate(lines) if line.startswith(f"  {key}=")]
        assert len(hits) == 1, f"{key} is listed {len(hits)} times"
        line = lines[hits[0]]
        value = OmegaConf.select(cfg, key)
        if not OmegaConf.is_config(value) and "${now:" not in str(OmegaConf.to_container(cfg)):  # output_dir: <date>
            assert line.startswith(f"  {key}={shown(value)}"), (key, value, line)
        beside = line.split("=", 1)[1].split("  ", 1)[1:]
        below = lines[hits[0] + 1] if hits[0] + 1 < len(lines) else ""
        meaning = beside[0].strip() if beside else (below.strip() if below.startswith(" " * COLUMN) else "")
        assert meaning, f"{key} has no meaning in: {line!r}"


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_train_help_all_lists_every_key_once_with_default_and_meaning(capsys, algo):
    text = help_of(capsys, "train", "all", f"algo={algo}")
    cfg = compose("train", [f"algo={algo}"])
    _check_listed_once(text, cfg, [k for k in expected_keys("train", algo) if k != "output_dir"])
    listed = {line.split("=", 1)[0].strip() for line in text.splitlines() if line.startswith("  algo.")}
    assert listed == {k for k in expected_keys("train", algo) if k.startswith("algo.")}  # no other family's, no unread
    assert "\nOther\n" not in text
    assert "  output_dir=outputs/<date>/<time>  " in text


@pytest.mark.parametrize("command", ["eval", "verify"])
def test_eval_and_verify_help_all_list_every_key_once(capsys, command):
    text = help_of(capsys, command, "all")
    cfg = compose(command, [])
    _check_listed_once(text, cfg, [k for k in expected_keys(command) if k != "output_dir"])
    assert "\nOther\n" not in text
    for key in HIDDEN[command]:  # keys the command never reads (eval: the training-only rollout keys)
        assert f"  {key}=" not in text
        assert key in dict.fromkeys(k for k, *_ in leaves(EvalConfig if command == "eval" else VerifyConfig))


def test_every_section_pattern_takes_a_key():
    """A pattern that matches nothing names a key that was renamed or removed: the key falls to "Other"."""
    for command, sections in SECTIONS.items():
        keys = {k for algo in (ALGORITHMS if command == "train" else ["grpo"]) for k in expected_keys(command, algo)}
        keys |= {"env.digits"} if command != "verify" else set()
        for section in sections:
            for pattern in (*section.keys, *section.more):
                assert any(_matches(pattern, key) for key in keys), f"{command}: {section.title}: {pattern}"


@pytest.mark.parametrize("command,args", [("train", []), ("train", ["algo=ppo", "env=countdown", "model=smollm2"]),
                                          ("eval", []), ("verify", [])])
def test_the_default_view_fits_a_screen(capsys, command, args):
    text = help_of(capsys, command, *args)
    lines = text.splitlines()
    assert len(lines) <= 80, f"{len(lines)} lines"
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    assert all(len(line) <= WIDTH for line in help_of(capsys, command, "all", *args).splitlines())


def test_internal_groups_are_hidden_and_the_choices_come_first_in_order(capsys):
    text = help_of(capsys, "train")
    assert "algo_schema" not in text
    choices = text.split("Choices", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    groups = [line.split("=", 1)[0].strip() for line in choices if not line.startswith(" " * COLUMN)]
    assert groups == ["env", "model", "algo", "rollout", "reward", "train"]
    block = " ".join(choices)
    for option in ("arithmetic", "countdown", "vf:NAME", "smollm2", "tiny", "dapo", "trpo", "vllm", "format_only",
                   "fast"):
        assert option in block, option
    assert "  env=arithmetic " in block and "  algo=grpo " in block and "  train=null " in block
    assert "algo=ppo" in help_of(capsys, "train", "algo=ppo").split("\n\n", 2)[1]  # the chosen option follows


def test_sections_keep_their_order_and_their_keys(capsys):
    titles = [s.title for s in SECTIONS["train"]]
    for algo in ("grpo", "ppo", "dpo"):
        text = help_of(capsys, "train", "all", f"algo={algo}")
        found = [line.removesuffix(f" (algo={algo})") for line in text.splitlines() if line in titles
                 or line == f"Algorithm (algo={algo})"]
        assert found == titles
        assert text == help_of(capsys, "train", "all", f"algo={algo}")  # the same twice
    placed = {r.key: r.section for r in rows("train", compose("train", []))}
    assert placed["train.steps"].startswith("Run") and placed["rollout.temperature"] == "Rollout / sampling"
    assert placed["algo.beta"] == "Algorithm" and placed["model.arch.hidden_size"].startswith("The tiny model")
    assert placed["optim.lr"] == "Batch and optimisation" and placed["env.digits"] == "What to train"


def test_default_view_shows_the_common_keys_and_counts_the_rest(capsys):
    text = help_of(capsys, "train")
    for key in ("train.steps", "rollout.temperature", "optim.lr", "algo.beta", "model.name_or_path"):
        assert f"  {key}=" in text
    for key in ("model.arch.hidden_size", "rollout.vllm.gpu_memory_utilization", "curriculum.band"):
        assert f"  {key}=" not in text
    assert "env.* of env=arithmetic: digits=2 ops=[+]" in text
    assert "more keys: rlvr train --help all, or --help TOPIC" in text
    vllm = help_of(capsys, "train", "vllm")
    assert "  rollout.vllm.gpu_memory_utilization=0.3" in vllm and "  train.steps=" not in vllm
    assert "  model.lora.alpha=32.0" in help_of(capsys, "train", "model.lora")


def test_a_preset_shows_its_own_defaults(capsys):
    text = help_of(capsys, "train", "model=smollm2", "algo=dapo")
    assert "  train.steps=40 " in text and "  optim.lr=1e-05 " in text and "  rollout.temperature=0.7 " in text
    assert "  algo.clip_eps_high=0.28 " in text and "  model.name_or_path=smollm2 " in text


def test_an_environment_shows_its_keys_with_their_yaml_comments(capsys):
    text = help_of(capsys, "train", "env=countdown")
    assert "  env.num_numbers=3" in text
    line = next(line for line in text.splitlines() if line.startswith("  env.ops="))
    assert line.startswith("  env.ops=[+,-,*,/]") and "the operators targets are built with" in line
    assert "  env.split=test " in help_of(capsys, "eval", "env")  # eval.yaml's own env key and its comment


def test_bad_topic_or_override_is_one_line(capsys):
    assert main(["train", "--help", "rollot"]) == 2
    err = capsys.readouterr().err
    assert "--help rollot: not a topic" in err and "sampling" in err
    with pytest.raises(SystemExit) as info:
        main(["train", "--help", "train.stepz=3"])
    assert "did you mean train.steps?" in str(info.value.code)


def test_hydras_own_help_stays_reachable(capsys):
    with pytest.raises(SystemExit) as info:  # Hydra's flags end the process themselves
        main(["train", "--hydra-help"])
    assert info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "== Flags ==" in out and "--cfg" in out


def test_envs_without_verifiers_says_how_to_get_it(monkeypatch, capsys):
    from rlvr.envs import catalog
    from rlvr.envs.vf import catalog as vf_catalog

    monkeypatch.setattr(vf_catalog, "verifiers_version", lambda: None)
    catalog.list_vf_tasksets()
    assert capsys.readouterr().out.strip() == ("verifiers tasksets (env=vf:NAME): the verifiers package is not "
                                               "installed: pip install 'rlvr[vf]', then a verifiers taskset package")


TASKSET = '''
import verifiers.v1 as vf


class EchoData(vf.TaskData):
    answer: str


class EchoTask(vf.Task[EchoData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == self.data.answer)


class EchoTaskset(vf.Taskset[EchoTask, vf.TasksetConfig]):
    def load(self):
        for i in range(4):
            yield EchoTask(EchoData(prompt=f"Say {i}.", answer=str(i)), self.config.task)


__all__ = ["EchoTaskset"]
'''


@pytest.mark.xdist_group("vf_env")  # beside tests/envs/vf/test_vf_env.py's installs: one worker pip-installs at a time
def test_envs_lists_an_installed_verifiers_taskset(tmp_path):
    pytest.importorskip("verifiers.v1")
    from tests.editable_package import editable_install

    package = f"rlvr_test_vf_echo_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    (tmp_path / "pkg" / package).mkdir(parents=True)
    (tmp_path / "pkg" / package / "__init__.py").write_text(textwrap.dedent(TASKSET))
    (tmp_path / "run").mkdir()
    with editable_install(tmp_path / "pkg", package.replace("_", "-"), [package]):
        result = run_rlvr("envs", cwd=tmp_path / "run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("verifiers tasksets (env=vf:NAME; verifiers ", 1)[1].splitlines()
    mine = [line.split() for line in lines if line.split()[:1] == [package]]
    assert mine == [[package, package.replace("_", "-"), "single-turn:", "rlvr", "train", f"env=vf:{package}"]], lines
