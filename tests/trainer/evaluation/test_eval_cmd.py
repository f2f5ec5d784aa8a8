"""`rlvr eval`: the trainer's greedy held-out eval reproduced exactly, a two-checkpoint run end to end
(files, schema, plots, resume, determinism), config checks, and the maj@k vote rule."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from rlvr.trainer.evaluation.eval_config import compose_eval_config as compose_eval
from rlvr.trainer.evaluation.eval_report import RESULTS_SCHEMA, schema_errors
from rlvr.trainer.evaluation.eval_run import run_eval, vote_of
from rlvr.trainer.evaluation.specs import env_specs_of, model_specs
from rlvr.errors import ConfigError

ARITH = ["env.digits=1", "env.ops=[+]"]  # the task tests/conftest.py's tiny models know


def quiet(*_):
    pass


def test_greedy_eval_equals_the_trainers_held_out_eval(tiny_lm_sft, arith_env, tmp_path):
    """`rlvr train` evaluates greedily on env.rows("test", eval_prompts, seed) with rollout.max_new_tokens;
    `rlvr eval temperature=0 n_prompts=N` must give the same numbers (here 23 = every 1-digit test sum)."""
    from rlvr.trainer.evaluation.evaluate import evaluate_greedy
    from rlvr.trainer.models.model import load_policy, load_tokenizer
    from rlvr.trainer.rollout.factory import build_engine

    path = str(tiny_lm_sft.path)
    engine = build_engine("hf", load_policy(path), load_tokenizer(path))
    trainer = evaluate_greedy(engine, arith_env, arith_env.rows("test", 23, seed=0), max_new_tokens=16)

    cfg = compose_eval([f"model.name_or_path={path}", *ARITH, "temperature=0", "n_prompts=23",
                        "rollout.max_new_tokens=16", f"output_dir={tmp_path}"])
    (result,) = run_eval(cfg, log=quiet)["results"]
    assert result["n_prompts"] == trainer["n"] == 23
    assert result["greedy_accuracy"] == result["pass@1"] == trainer["accuracy"]
    assert result["reward_mean"] == pytest.approx(trainer["reward_mean"], abs=1e-12)
    assert {f"status/{s}": c / 23 for s, c in result["status_counts"].items()} == \
        {k: v for k, v in trainer.items() if k.startswith("status/")}
    assert 0 < trainer["accuracy"] < 1 or trainer["reward_mean"] > 0  # the model answers in format: not a vacuous match


def _fake_run(tiny_lm, tiny_lm_sft, root):
    """A run directory as `rlvr train` leaves it: base model recorded in trainer_state.pt, one checkpoint."""
    run = root / "run"
    step = run / "checkpoints" / "step_5"
    shutil.copytree(tiny_lm_sft.path, step)
    torch.save({"step": 5, "base_model": str(tiny_lm.path)}, step / "trainer_state.pt")
    return run


def _rlvr_eval(*overrides, cwd):
    env = {**os.environ, "RLVR_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "rlvr", "eval", *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True)


def _sorted_lines(path):
    return sorted(path.read_text().splitlines())


@pytest.mark.slow  # two `rlvr eval` subprocesses, about 30 s on 2 cores
def test_eval_two_checkpoints_end_to_end_resumes_and_is_deterministic(tiny_lm, tiny_lm_sft, tmp_path):
    run = _fake_run(tiny_lm, tiny_lm_sft, tmp_path)
    out = tmp_path / "eval"
    overrides = [f"models=[{run}]", *ARITH, "n_samples=3", "temperature=1.0", "n_prompts=6",
                 "rollout.max_new_tokens=8", "threads=1"]
    first = _rlvr_eval(*overrides, f"output_dir={out}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]

    results = json.loads((out / "results.json").read_text())
    assert schema_errors(results, RESULTS_SCHEMA) == []
    assert [(m["label"], m["step"]) for m in results["models"]] == [("run/base", 0), ("run/step_5", 5)]
    assert [r["model"] for r in results["results"]] == ["run/base", "run/step_5"]
    for r in results["results"]:
        assert set(r["pass@k"]) == set(r["maj@k"]) == {"1", "2", "3"}
        assert r["pass@k"]["1"] == pytest.approx(r["pass@1"])
        assert r["pass@k"]["1"] <= r["pass@k"]["2"] <= r["pass@k"]["3"]
        assert sum(r["status_counts"].values()) == 6 * 3
        assert set(r["verifier_means"]) == {"exact", "format"}
    assert results["results"][0]["truncated_frac"] > 0.5  # the random model seldom stops
    lines = (out / "completions.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 6 * 3
    record = json.loads(lines[0])
    assert {"model", "env", "prompt_id", "messages", "completion", "reward", "status", "details"} <= record.keys()
    assert record["messages"][-1]["role"] == "user"
    table = (out / "results.md").read_text()
    assert "before (step 0)" in table and "after (step 5)" in table and table in first.stdout
    assert (out / "plots" / "run.png").stat().st_size > 0

    again = _rlvr_eval(*overrides, f"output_dir={out}", cwd=tmp_path)  # resumes: nothing left to do
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 prompt(s) to run, 12 already done" in again.stdout
    assert (out / "completions.jsonl").read_text().splitlines() == lines

    # Killed part-way (after base and 2 of step_5's 3 samples for a prompt): the resumed run completes
    # with exactly the samples and report of the uninterrupted one.
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(out / "eval_settings.json", resumed)
    (resumed / "completions.jsonl").write_text("\n".join(lines[:20]) + "\n" + lines[20][:15])  # a torn last line
    cfg = compose_eval([*overrides, f"output_dir={resumed}"])
    assert run_eval(cfg, log=quiet) == results
    assert _sorted_lines(resumed / "completions.jsonl") == sorted(lines)

    with pytest.raises(ConfigError, match="n_samples: 3 -> 2"):  # other settings do not mix into one output_dir
        run_eval(compose_eval([*overrides, "n_samples=2", f"output_dir={out}"]), log=quiet)


@pytest.mark.parametrize("overrides, message", [
    (["temperature=0", "n_samples=4"], "greedy"),
    (["n_samples=0"], "n_samples"),
    (["n_prompts=0"], "n_prompts"),
    (["temperature=-1"], "temperature"),
])
def test_bad_settings_are_refused(overrides, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        run_eval(compose_eval(["model.name_or_path=x", *overrides, f"output_dir={tmp_path}"]), log=quiet)


@pytest.mark.parametrize("override, key", [("rollout.temperature=0.7", "temperature=0.7"),
                                           ("rollout.top_p=0.9", "top_p=0.9"), ("rollout.top_k=5", "top_k=5")])
def test_a_sampling_key_under_rollout_is_refused_naming_the_top_level_key(override, key, tmp_path):
    """`rollout.temperature` used to be silently overridden by the top-level `temperature`: one key per quantity."""
    with pytest.raises(ConfigError, match=rf"^{override.split('=')[0]}=.* is not read by rlvr eval: set {key} "):
        run_eval(compose_eval(["model.name_or_path=x", override, f"output_dir={tmp_path}"]), log=quiet)


def test_the_top_level_sampling_keys_reach_the_engine():
    from rlvr.trainer.evaluation.eval_run import sampling_params

    cfg = compose_eval(["model.name_or_path=x", "n_samples=4", "temperature=0.7", "top_p=0.9", "top_k=5"])
    params = sampling_params(cfg)
    assert (params.temperature, params.top_p, params.top_k, params.greedy) == (0.7, 0.9, 5, False)
    assert (cfg.rollout.temperature, cfg.rollout.top_p, cfg.rollout.top_k) == (0.7, 0.9, 5)


def test_rlvr_eval_does_not_import_the_training_loop():
    """trainer/evaluation/ sits below trainer/run.py: followed statically (imports inside functions too)."""
    from rlvr.trainer.models.tiny_model import rlvr_sources

    reached = rlvr_sources(["rlvr.trainer.evaluation.eval_run"])
    assert "rlvr.trainer.evaluation.evaluate" in reached and "rlvr.trainer.env_config" in reached
    assert "rlvr.trainer.run" not in reached


def test_no_model_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="models="):
        run_eval(compose_eval([f"output_dir={tmp_path}"]), log=quiet)


def test_lists_of_models_and_envs(tmp_path):
    cfg = compose_eval(["model.name_or_path=a", f"models=[b,{tmp_path}/r/checkpoints/step_7,b]",
                        "envs=[arithmetic,{name:countdown,num_numbers:4,split:train}]"])
    assert [(m.label, m.step) for m in model_specs(cfg)] == [("a", None), ("b#1", None), ("r/step_7", 7), ("b#3", None)]
    arithmetic, countdown = env_specs_of(cfg)
    assert (arithmetic.name, arithmetic.split, arithmetic.params["digits"]) == ("arithmetic", "test", 2)  # shipped YAML
    assert (countdown.name, countdown.split, countdown.params["num_numbers"]) == ("countdown", "train", 4)
    single = env_specs_of(compose_eval(["env=countdown", "env.split=train"]))
    assert [(e.name, e.split) for e in single] == [("countdown", "train")]


def test_vote_rule():
    def composite(first_details):
        return {"components": {"exact": {"reward": 0, "details": first_details}, "format": {"reward": 1, "details": {}}}}

    assert vote_of(composite({"extracted": " 007 "}), "") == "7"  # numbers canonicalised
    assert vote_of(composite({"extracted": "7.0"}), "") == "7"
    assert vote_of({"pred": "\\frac{1}{2}", "extracted": "0.5/1"}, "") == "\\frac{1}{2}"  # math: normalised first
    assert vote_of({"expression": "1+2"}, "") == "1+2"
    assert vote_of({"reason": "no answer"}, "<answer>a</answer> <answer> b </answer>") == "b"  # last answer tag
    assert vote_of(composite({"extracted": ""}), "no tags") is None


def _records(model_path, statuses_per_prompt):
    return [{"model_path": model_path, "env": "arithmetic", "prompt_id": f"p{i}", "sample": j, "status": s,
             "reward": 1.0 if s == "correct" else 0.0, "vote": "1" if s == "correct" else "2",
             "details": {"components": {"exact": {"reward": float(s == "correct")}}},
             "response_tokens": 3 + j, "truncated": j == 0}
            for i, statuses in enumerate(statuses_per_prompt) for j, s in enumerate(statuses)]


def test_results_json_matches_its_schema():
    from rlvr.trainer.evaluation.eval_report import build_results
    from rlvr.trainer.evaluation.specs import EnvSpec, ModelSpec

    records = _records("m", [["correct", "incorrect"], ["incorrect", "unparsable"]])
    rows = {"arithmetic": [{"id": "p0"}, {"id": "p1"}]}
    settings = {"n_samples": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0}
    results = build_results(records, [ModelSpec("m", "m")], [EnvSpec("arithmetic", "arithmetic")], rows, settings)
    assert schema_errors(results, RESULTS_SCHEMA) == []
    (r,) = results["results"]
    assert (r["pass@1"], r["pass@k"]["2"], r["maj@k"]["1"], r["maj@k"]["2"]) == (0.25, 0.5, 0.5, 0.5)
    assert r["status_counts"] == {"correct": 1, "incorrect": 2, "unparsable": 1}
    assert r["response_tokens"] == {"mean": 3.5, "p50": 3, "p95": 4} and r["truncated_frac"] == 0.5
    assert r["greedy_accuracy"] is None and r["verifier_means"] == {"exact": 0.25}

    broken = {**results, "results": [{**r, "pass@1": 1.5, "extra": 1}]}
    del broken["settings"]
    errors = schema_errors(broken, RESULTS_SCHEMA)
    assert any("settings" in e for e in errors) and any("maximum" in e for e in errors) and any("extra" in e for e in errors)
    jsonschema = pytest.importorskip("jsonschema")  # the full validator agrees, where installed
    jsonschema.validate(results, RESULTS_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, RESULTS_SCHEMA)


@pytest.mark.parametrize("group", ["env", "rollout"])
def test_eval_yaml_composes_with_every_option(group):
    from importlib.resources import files

    for path in files("rlvr.conf").joinpath(group).iterdir():
        if path.name.endswith(".yaml"):
            cfg = compose_eval([f"{group}={path.name.removesuffix('.yaml')}", "temperature=0.5"])
            assert cfg.rollout.temperature == 0.5 and cfg.env.split == "test"


def test_two_runs_with_the_same_name_keep_both_plots_and_one_sample_has_no_at_k_columns(tmp_path):
    from rlvr.trainer.evaluation.eval_report import build_results, format_markdown, write_plots
    from rlvr.trainer.evaluation.specs import EnvSpec, ModelSpec

    models, records = [], []
    for run, statuses in (("a/run", [["correct"], ["incorrect"]]), ("b/run", [["correct"], ["correct"]])):
        for step in (0, 10):
            label = f"{run}@{step}"
            models.append(ModelSpec(label, label, step=step, run=run))
            records += _records(label, statuses)
    rows = {"arithmetic": [{"id": "p0"}, {"id": "p1"}]}
    settings = {"n_samples": 1, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0}
    results = build_results(records, models, [EnvSpec("arithmetic", "arithmetic")], rows, settings)
    assert sorted(p.name for p in write_plots(tmp_path, results)) == ["run.png", "run_2.png"]
    table = format_markdown(results).splitlines()
    header = next(line for line in table if line.startswith("| model |"))
    assert "pass@1" in header and "maj@" not in header
    row = next(line for line in table if line.startswith("| b/run@10 |"))
    assert row.count("|") == header.count("|") and "100.0%" in row


def test_the_plot_shows_the_pass_at_1_confidence_interval(tmp_path, monkeypatch):
    """results.json had pass@1_ci95 for every point; the plot drew none of it."""
    import matplotlib.axes

    from rlvr.trainer.evaluation.eval_report import build_results, write_plots
    from rlvr.trainer.evaluation.specs import EnvSpec, ModelSpec

    models, records = [], []
    for step, statuses in ((0, [["incorrect"], ["incorrect"], ["correct"]]), (10, [["correct"], ["correct"], ["incorrect"]])):
        label = f"run@{step}"
        models.append(ModelSpec(label, label, step=step, run="run"))
        records += _records(label, statuses)
    rows = {"arithmetic": [{"id": f"p{i}"} for i in range(3)]}
    settings = {"n_samples": 1, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0}
    results = build_results(records, models, [EnvSpec("arithmetic", "arithmetic")], rows, settings)
    bands = []
    real = matplotlib.axes.Axes.fill_between
    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between",
                        lambda self, x, y1, y2, **kw: bands.append((list(x), list(y1), list(y2))) or real(self, x, y1, y2, **kw))
    write_plots(tmp_path, results)
    cis = [r["pass@1_ci95"] for r in sorted(results["results"], key=lambda r: r["model"])]
    assert bands == [([0, 10], [cis[0][0], cis[1][0]], [cis[0][1], cis[1][1]])]
