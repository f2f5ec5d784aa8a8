"""`rlvr eval`'s reports, computed from `completions.jsonl` alone: results.json, results.md, plots/*.png.

Per (model, env): pass@1 (mean over all samples of status `correct`), unbiased pass@k for every
k <= n_samples, maj@k, its percentile-bootstrap 95% interval for pass@1 (prompts resampled),
mean reward, mean reward of each verifier of the env's composite, counts per status, response
length in tokens (mean; p50/p95 by nearest rank), truncation rate, and `greedy_accuracy` when
the samples were greedy (temperature=0). The layout is `RESULTS_SCHEMA` (docs/evaluation.md documents it).

Reward hacking, as the training loop's monitor counts it (trainer/experience/metrics.py): `hack_rate`
(share of samples whose details name any hack kind, its own or a component's), `hack_rates` (share per
kind), and for envs with held-back tests `shown_pass`, `hidden_pass` and `hidden_gap` (means over the
samples that carry them; null for other envs). Each run's training reward (`reward.kind` in its
config.yaml: env, or a control such as random) goes with its models, so a control reads beside a real run.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

from rlvr.trainer.evaluation.passk import bootstrap_ci, maj_at_k, mean_pass_at_k
from rlvr.verifiers.compose import details_values, hacks_in

SCHEMA_VERSION = 2  # 2: maj@k may be null (maj@k_na says why), from_run
_NUM = {"type": "number"}
_FRACTION = {"type": "number", "minimum": 0, "maximum": 1}
_FRACTION_OR_NULL = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
_BY_K = {"type": "object", "patternProperties": {"^[1-9][0-9]*$": _FRACTION}, "additionalProperties": False}
RESULT_SCHEMA = {
    "type": "object",
    "required": ["model", "env", "n_prompts", "n_samples", "greedy", "pass@1", "pass@1_ci95", "pass@k", "maj@k",
                 "maj@k_na", "greedy_accuracy", "reward_mean", "verifier_means", "status_counts", "response_tokens",
                 "truncated_frac", "hack_rate", "hack_rates", "shown_pass", "hidden_pass", "hidden_gap"],
    "additionalProperties": False,
    "properties": {
        "model": {"type": "string"}, "env": {"type": "string"},
        "n_prompts": {"type": "integer", "minimum": 1}, "n_samples": {"type": "integer", "minimum": 1},
        "greedy": {"type": "boolean"},
        "pass@1": _FRACTION,
        "pass@1_ci95": {"type": "array", "items": _FRACTION, "minItems": 2, "maxItems": 2},
        "pass@k": _BY_K, "maj@k": {**_BY_K, "type": ["object", "null"]}, "maj@k_na": {"type": ["string", "null"]},
        "greedy_accuracy": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "reward_mean": _NUM,
        "verifier_means": {"type": "object", "additionalProperties": _NUM},
        "status_counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "response_tokens": {"type": "object", "required": ["mean", "p50", "p95"], "additionalProperties": False,
                            "properties": {"mean": _NUM, "p50": _NUM, "p95": _NUM}},
        "truncated_frac": _FRACTION,
        "hack_rate": _FRACTION,
        "hack_rates": {"type": "object", "additionalProperties": _FRACTION},
        "shown_pass": _FRACTION_OR_NULL, "hidden_pass": _FRACTION_OR_NULL,
        "hidden_gap": {"type": ["number", "null"], "minimum": -1, "maximum": 1},
    },
}
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["schema_version", "settings", "from_run", "models", "envs", "results"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "integer"},
        "settings": {"type": "object", "required": ["n_samples", "temperature", "max_new_tokens", "seed"]},
        "from_run": {"type": ["object", "null"], "required": ["configs", "taken", "overridden"],
                     "additionalProperties": False,
                     "properties": {"configs": {"type": "array", "items": {"type": "string"}},
                                    "taken": {"type": "object"}, "overridden": {"type": "object"}}},
        "models": {"type": "array", "items": {
            "type": "object", "required": ["label", "path", "step", "run", "reward"], "additionalProperties": False,
            "properties": {"label": {"type": "string"}, "path": {"type": "string"},
                           "step": {"type": ["integer", "null"]}, "run": {"type": ["string", "null"]},
                           "reward": {"type": ["string", "null"]}}}},
        "envs": {"type": "array", "items": {
            "type": "object", "required": ["label", "name", "split", "params", "n_prompts"], "additionalProperties": False,
            "properties": {"label": {"type": "string"}, "name": {"type": "string"}, "split": {"type": "string"},
                           "params": {"type": "object"}, "n_prompts": {"type": "integer"}}}},
        "results": {"type": "array", "items": RESULT_SCHEMA},
    },
}


def schema_errors(value, schema: dict, where: str = "$") -> list[str]:
    """Where `value` breaks `schema`, for the JSON Schema subset above (type, required, properties,
    additionalProperties, patternProperties, items, minItems/maxItems, minimum/maximum)."""
    types = schema.get("type")
    if types is not None:
        allowed = types if isinstance(types, list) else [types]
        if not any(_is_type(value, t) for t in allowed):
            return [f"{where}: expected {types}, got {type(value).__name__}"]
    errors = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} > maximum {schema['maximum']}")
    if isinstance(value, dict):
        errors += [f"{where}: missing {key!r}" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            sub = schema.get("properties", {}).get(key)
            if sub is None:
                sub = next((s for p, s in schema.get("patternProperties", {}).items() if re.search(p, key)), None)
            if sub is None:
                sub = schema.get("additionalProperties", True)
                if sub is False:
                    errors.append(f"{where}: unexpected key {key!r}")
                    continue
            if isinstance(sub, dict):
                errors += schema_errors(item, sub, f"{where}.{key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            errors.append(f"{where}: {len(value)} items, outside [{schema.get('minItems', 0)}, {schema.get('maxItems')}]")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    return errors


def _is_type(value, name: str) -> bool:
    return {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
            "null": lambda v: v is None,
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
            }[name](value)


def compute_metrics(samples_by_prompt: list[list[dict]], n_samples: int, greedy: bool, seed: int = 0) -> dict:
    """Metrics of one (model, env) from its records, grouped by prompt, each prompt's in sample order."""
    flat = [r for samples in samples_by_prompt for r in samples]
    correct = [[r["status"] == "correct" for r in samples] for samples in samples_by_prompt]
    counts = [sum(c) for c in correct]
    pass_1 = sum(counts) / len(flat)
    per_verifier = defaultdict(list)
    for r in flat:
        for name, part in r["details"].get("components", {}).items():
            per_verifier[name].append(part["reward"])
    lengths = sorted(r["response_tokens"] for r in flat)
    ks = range(1, n_samples + 1)
    return {
        "n_prompts": len(samples_by_prompt), "n_samples": n_samples, "greedy": greedy,
        "pass@1": pass_1,
        "pass@1_ci95": list(bootstrap_ci([c / n_samples for c in counts], seed=seed)),
        "pass@k": {str(k): mean_pass_at_k(counts, n_samples, k) for k in ks},
        **majority_metrics(samples_by_prompt, correct, ks),
        "greedy_accuracy": pass_1 if greedy else None,
        "reward_mean": sum(r["reward"] for r in flat) / len(flat),
        "verifier_means": {name: sum(v) / len(v) for name, v in per_verifier.items()},
        "status_counts": dict(sorted(Counter(r["status"] for r in flat).items())),
        "response_tokens": {"mean": sum(lengths) / len(lengths), "p50": _nearest_rank(lengths, 0.50),
                            "p95": _nearest_rank(lengths, 0.95)},
        "truncated_frac": sum(r["truncated"] for r in flat) / len(flat),
        **hack_metrics(flat),
    }


def majority_metrics(samples_by_prompt: list[list[dict]], correct: list[list[bool]], ks) -> dict:
    """`maj@k` for every k, or null with `maj@k_na` saying why no vote could be held.

    A vote needs an answer (eval_run.vote_of). A reward that names none, such as a TRL-style function
    (verifier=python) on completions without `<answer>` tags, left every vote empty and printed maj@k 0.0% beside
    a pass@k of 20-30% (issue 51), a zero that reads as a result. So maj@k is null when a correct sample has no
    answer: the reward judged it without saying what it answered, and no majority can count it. Where no sample
    is correct, maj@k is 0 whether or not anyone voted (pass@k is 0 too), and a sample without an answer beside
    others with one loses the vote (Minerva's rule: no answer is a wrong one)."""
    pairs = [(r["vote"], c) for samples, cs in zip(samples_by_prompt, correct) for r, c in zip(samples, cs)]
    unvoted = sum(c and v is None for v, c in pairs)
    if unvoted:
        why = (f"{unvoted} of {sum(c for _, c in pairs)} correct samples have no answer to vote on: the reward "
               f"judged them without extracting one (as verifier=python does), so a majority vote cannot count them")
        return {"maj@k": None, "maj@k_na": why}
    return {"maj@k": {str(k): sum(maj_at_k([r["vote"] for r in s], c, k) for s, c in zip(samples_by_prompt, correct))
                      / len(samples_by_prompt) for k in ks}, "maj@k_na": None}


def hack_metrics(records: list[dict]) -> dict:
    """`hack_rate`, `hack_rates` per kind seen, and the held-back tests' pass rates (null without them)."""
    flagged = [hacks_in(r["details"]) for r in records]
    kinds = Counter(k for ks in flagged for k in ks)
    shown = [v for r in records for v in details_values(r["details"], "shown_pass")]
    hidden = [v for r in records for v in details_values(r["details"], "hidden_pass")]
    # the gap is a mean over the same samples as both rates (each verifier with hidden tests writes both)
    return {"hack_rate": sum(bool(ks) for ks in flagged) / len(records),
            "hack_rates": {kind: count / len(records) for kind, count in sorted(kinds.items())},
            "shown_pass": sum(shown) / len(shown) if shown else None,
            "hidden_pass": sum(hidden) / len(hidden) if hidden else None,
            "hidden_gap": (sum(shown) - sum(hidden)) / len(shown) if shown else None}


def _nearest_rank(sorted_values: list, q: float):
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def build_results(records: list[dict], models, envs, rows: dict, settings: dict, from_run: dict | None = None) -> dict:
    """results.json's content: the selected rows of every (model, env), from the records; `from_run`: what the
    config took from the models' training run (run_config.py's FromRun.to_json), None when none is a run's."""
    index = defaultdict(list)
    for r in records:
        index[(r["model_path"], r["env"], r["prompt_id"])].append(r)
    greedy = settings["temperature"] == 0
    results = []
    for env in envs:
        for model in models:
            grouped = [sorted(index[(model.path, env.label, row["id"])], key=lambda r: r["sample"])
                       for row in rows[env.label]]
            grouped = [g for g in grouped if g]
            if grouped:
                results.append({"model": model.label, "env": env.label,
                                **compute_metrics(grouped, settings["n_samples"], greedy, settings["seed"])})
    return {
        "schema_version": SCHEMA_VERSION,
        "settings": settings,
        "from_run": from_run,
        "models": [{"label": m.label, "path": m.path, "step": m.step, "run": m.run, "reward": m.reward}
                   for m in models],
        "envs": [{"label": e.label, "name": e.name, "split": e.split, "params": e.params,
                  "n_prompts": len(rows[e.label])} for e in envs],
        "results": results,
    }


def format_markdown(results: dict) -> str:
    s = results["settings"]
    n = s["n_samples"]
    mode = "greedy (temperature=0)" if s["temperature"] == 0 else f"temperature={s['temperature']}, top_p={s['top_p']}"
    lines = [f"# rlvr eval\n\n{n} sample(s) per prompt, {mode}, max_new_tokens={s['max_new_tokens']}, seed={s['seed']}"]
    steps = {m["label"]: m["step"] for m in results["models"]}
    names = {m["label"]: _model_name(m) for m in results["models"]}
    for env in results["envs"]:
        rows = [r for r in results["results"] if r["env"] == env["label"]]
        at_k = f" pass@{n} | maj@{n} |" if n > 1 else ""  # with one sample both equal pass@1
        hidden = any(r["shown_pass"] is not None for r in rows)
        lines += [f"\n## {env['label']} ({env['n_prompts']} {env['split']} prompts)\n",
                  f"| model | step | pass@1 [95% CI] |{at_k} mean reward | hack rate (per kind) |"
                  + (" shown / hidden tests passed (gap) |" if hidden else "")
                  + " per verifier | statuses | tokens mean / p50 / p95 | truncated |",
                  "|---|---|---|" + ("---|---|" if n > 1 else "") + "---|---|" + ("---|" if hidden else "")
                  + "---|---|---|---|"]
        for r in rows:
            lo, hi = r["pass@1_ci95"]
            verifiers = ", ".join(f"{k} {v:.3f}" for k, v in r["verifier_means"].items())
            statuses = ", ".join(f"{k} {v}" for k, v in r["status_counts"].items())
            t = r["response_tokens"]
            step = steps[r["model"]]
            majority = "n/a" if r["maj@k"] is None else f"{r['maj@k'][str(n)]:.1%}"
            at_k = f" {r['pass@k'][str(n)]:.1%} | {majority} |" if n > 1 else ""
            kinds = ", ".join(f"{k} {v:.1%}" for k, v in r["hack_rates"].items())
            hacks = f"{r['hack_rate']:.1%}" + (f" ({kinds})" if kinds else "")
            split = "" if not hidden else " n/a |" if r["shown_pass"] is None else \
                f" {r['shown_pass']:.1%} / {r['hidden_pass']:.1%} ({100 * r['hidden_gap']:+.1f} pts) |"
            lines.append(f"| {names[r['model']]} | {'' if step is None else step} | {r['pass@1']:.1%} [{lo:.1%}, {hi:.1%}] "
                         f"|{at_k} {r['reward_mean']:.3f} | {hacks} |{split} {verifiers} "
                         f"| {statuses} | {t['mean']:.1f} / {t['p50']} / {t['p95']} | {r['truncated_frac']:.1%} |")
        if n > 1:
            lines += [f"\nmaj@{n} n/a for {names[r['model']]}: {r['maj@k_na']}" for r in rows if r["maj@k"] is None]
        if len(rows) >= 2 and _same_run(results["models"], rows[0]["model"], rows[-1]["model"]):
            lines += ["", before_after(rows[0], rows[-1], steps, env["n_prompts"], env["split"])]
    return "\n".join(lines) + "\n"


def _same_run(models: list[dict], first: str, last: str) -> bool:
    """Whether a before/after table of these two models reads as one: not across two training runs
    (a real run beside its control is read from the table above, row by row)."""
    runs = {m["label"]: m["run"] for m in models}
    return runs[first] is None or runs[last] is None or runs[first] == runs[last]


def _model_name(model: dict) -> str:
    """The label, marked with its run's training reward when that was a control (reward=random, ...)."""
    return model["label"] if model["reward"] in (None, "env") else f"{model['label']} (reward={model['reward']})"


def before_after(before: dict, after: dict, steps: dict, n_prompts: int, split: str) -> str:
    """The first and last model in the layout of `rlvr train`'s summary table."""
    def head(r, word):
        step = steps[r["model"]]
        return f"{word} (step {step})" if step is not None else f"{word} ({r['model']})"

    name = "held-out greedy accuracy" if before["greedy"] else "held-out pass@1"
    b, a = before["pass@1"], after["pass@1"]
    return "\n".join([
        f"| metric ({n_prompts} {split} prompts) | {head(before, 'before')} | {head(after, 'after')} | change |",
        "|---|---|---|---|",
        f"| {name} | {b:.1%} | {a:.1%} | {100 * (a - b):+.1f} pts |",
        f"| held-out mean reward | {before['reward_mean']:.3f} | {after['reward_mean']:.3f} "
        f"| {after['reward_mean'] - before['reward_mean']:+.3f} |",
    ])


def write_plots(out: Path, results: dict) -> list[Path]:
    """One PNG per training run with two or more evaluated steps: pass@1 and mean reward vs step, a line per env."""
    runs = defaultdict(list)
    for m in results["models"]:
        if m["run"] is not None and m["step"] is not None:
            runs[m["run"]].append(m)
    runs = {run: ms for run, ms in runs.items() if len({m["step"] for m in ms}) >= 2}
    if not runs:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written, used = [], set()
    (out / "plots").mkdir(exist_ok=True)
    for run, ms in runs.items():
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for env in results["envs"]:
            points = sorted((m["step"], r) for m in ms for r in results["results"]
                            if r["model"] == m["label"] and r["env"] == env["label"])
            steps = [p[0] for p in points]
            for ax, key in zip(axes, ("pass@1", "reward_mean")):
                line, = ax.plot(steps, [p[1][key] for p in points], marker="o", label=env["label"])
            axes[0].fill_between(steps, [p[1]["pass@1_ci95"][0] for p in points],  # the bootstrap 95% interval
                                 [p[1]["pass@1_ci95"][1] for p in points], color=line.get_color(), alpha=0.2)
        for ax, key in zip(axes, ("pass@1 (band: 95% CI over prompts)", "mean reward")):
            ax.set_xlabel("training step")
            ax.set_ylabel(key)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle(run)
        fig.tight_layout()
        base = stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(run).name or "run")
        copy = 1
        while stem in used:  # two runs with the same directory name (a/run, b/run) keep both plots
            copy += 1
            stem = f"{base}_{copy}"
        used.add(stem)
        path = out / "plots" / f"{stem}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def write_reports(out: Path, records: list[dict], models, envs, rows: dict, settings: dict, plots: bool = True,
                  from_run: dict | None = None) -> dict:
    results = build_results(records, models, envs, rows, settings, from_run)
    errors = schema_errors(results, RESULTS_SCHEMA)
    if errors:  # a bug in this module, not the user's doing
        raise AssertionError("results.json does not match its schema: " + "; ".join(errors[:5]))
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text(format_markdown(results))
    if plots:
        write_plots(out, results)
    return results
