"""`rlvr eval`: several checkpoints x several environments, sampled, verified, reported side by side.

For each model, for each environment, the rows `env.rows(split, n_prompts, seed)` are generated
in fixed chunks of `batch_prompts` prompts (`n_samples` completions each), scored by the env's
verifiers, and appended to `completions.jsonl`; the report is then computed from that file alone.

Greedy: `temperature=0` decodes greedily (n_samples must be 1), exactly as the trainer's held-out
eval does (`evaluate_greedy`: same rows for the same seed, same chunks of 256, same max_new_tokens),
so `rlvr eval 'models=[RUN_DIR]' temperature=0` reproduces the before/after numbers of `rlvr train`.

A run's models (a run directory, a checkpoint) are evaluated on the run's environment, prompt style, reward and
length unless the command line sets them, and the command prints what it took (run_config.py).

Resume and determinism: an existing `output_dir` resumes. A (model, env, prompt) item with all its
samples in `completions.jsonl` is skipped; a chunk with any item left is generated again whole,
with the torch seed derived from (seed, env, chunk index), and only its missing items are kept,
so an interrupted-then-resumed run writes the same samples as an uninterrupted one (HF engine;
vLLM seeds through `rollout.seed`). Settings that change samples must match the first run's.
"""

from __future__ import annotations

import json
import re
import sys
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from rlvr.errors import ConfigError
from rlvr.sandboxes.hosts import apply_hosts
from rlvr.trainer.evaluation.eval_report import write_reports
from rlvr.trainer.evaluation.evaluate import generate_and_score
from rlvr.trainer.evaluation.run_config import adopt_run_config
from rlvr.trainer.evaluation.specs import EnvSpec, ModelSpec, build_spec_env, env_specs_of, model_specs, select_rows
from rlvr.trainer.rollout.generation_settings import OFF, check_generation_settings, generation_settings
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.prompts import prompt_lengths
from rlvr.trainer.truncation import TRUNCATED_REWARDS, context_warning, truncation_warning

COMPLETIONS = "completions.jsonl"
SETTINGS = "eval_settings.json"


def run_eval(cfg, log=print, engine_factory: Callable | None = None, overrides: list[str] | None = None) -> dict:
    """The command. `engine_factory(ModelSpec) -> engine` replaces model loading (tests use stand-ins).
    `overrides`: the command line's, which say what it sets over a run's config (run_config.py); None: the keys
    whose values differ from conf/eval.yaml's."""
    from_run = adopt_run_config(cfg, overrides)
    for line in from_run.lines() if from_run else []:
        log(line)
    _validate(cfg)
    apply_hosts(cfg.sandbox.hosts)  # every code sandbox of this command uses them
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    models, env_specs = model_specs(cfg), env_specs_of(cfg)
    envs = {spec.label: build_spec_env(spec) for spec in env_specs}
    rows = {spec.label: select_rows(envs[spec.label], spec, cfg.n_prompts, cfg.seed) for spec in env_specs}
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    lengths = env_lengths(cfg, envs)
    _check_settings(out, settings_of(cfg, lengths))
    done = _load_done(out / COMPLETIONS, cfg.n_samples)
    params = sampling_params(cfg)
    factory = engine_factory or (_endpoint_factory(cfg) if cfg.endpoint else _hf_factory(cfg, envs, rows, lengths))

    todo = {(m.path, e.label): [r for r in rows[e.label] if (m.path, e.label, r["id"]) not in done]
            for m in models for e in env_specs}
    total, skipped = sum(len(v) for v in todo.values()), sum(len(v) for v in rows.values()) * len(models)
    skipped -= total
    log(f"rlvr eval: {len(models)} model(s) x {len(env_specs)} env(s); {cfg.n_samples} sample(s) per prompt, "
        f"{'greedy' if params.greedy else f'temperature {cfg.temperature}'}; "
        f"{total} prompt(s) to run, {skipped} already done in {out / COMPLETIONS}")
    bar = tqdm(total=total, desc="eval", unit="prompt", dynamic_ncols=True, disable=total == 0,
               mininterval=0.2 if sys.stderr.isatty() else 15.0)
    with open(out / COMPLETIONS, "a") as sink:
        for model in models:
            if not any(todo[(model.path, e.label)] for e in env_specs):
                continue
            engine = factory(model)
            for spec in env_specs:
                if todo[(model.path, spec.label)]:
                    max_new_tokens, truncated_reward = lengths[spec.label]
                    warning = _context_warning(engine, envs[spec.label], todo[(model.path, spec.label)],
                                               max_new_tokens, model.path)
                    if warning:
                        log(f"{model.label} on {spec.label}: {warning}")
                    for records in evaluate_rows(engine, envs[spec.label], rows[spec.label],
                                                 replace(params, max_new_tokens=max_new_tokens), cfg.seed,
                                                 model, spec, skip={r for (p, e, r) in done
                                                                    if p == model.path and e == spec.label},
                                                 batch_prompts=cfg.batch_prompts, truncated_reward=truncated_reward):
                        sink.writelines(json.dumps(r) + "\n" for r in records)
                        sink.flush()
                        bar.update(len(records) // cfg.n_samples)
            del engine
    bar.close()
    records = _read_records(out / COMPLETIONS)
    results = write_reports(out, records, models, env_specs, rows, settings_of(cfg, lengths), plots=cfg.plots,
                            from_run=from_run.to_json() if from_run else None)
    log((out / "results.md").read_text())
    for result in results.get("results", []):
        warning = truncation_warning(result["truncated_frac"], lengths[result["env"]][0],
                                     f"{result['model']} on {result['env']}:")
        if warning:
            log(warning)
    log(f"rlvr eval: results in {out / 'results.json'}, {out / 'results.md'} and {out / COMPLETIONS}")
    return results


def _context_warning(engine, env, rows: list[dict], max_new_tokens: int, model_path: str) -> str | None:
    """context_warning for these rows' prompts on the model at `model_path` (its config.json's context)."""
    from transformers import AutoConfig

    try:
        context = getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", None)
    except (OSError, ValueError):  # a test's stand-in model without a config: nothing to check against
        return None
    return context_warning(prompt_lengths(engine.tokenizer, env, rows), max_new_tokens, context)


def evaluate_rows(engine, env, rows: list[dict], params: SamplingParams, seed: int, model: ModelSpec,
                  spec: EnvSpec, skip: set = frozenset(), batch_prompts: int = 256, truncated_reward: str = "keep"):
    """Yield, per chunk of `batch_prompts` rows with work left, the completion records of the rows not in `skip`."""
    for index, start in enumerate(range(0, len(rows), batch_prompts)):
        chunk = rows[start : start + batch_prompts]
        if all(row["id"] in skip for row in chunk):
            continue
        torch.manual_seed(zlib.crc32(f"{seed}/{spec.label}/{index}".encode()))
        rollout, repeated, results = generate_and_score(engine, env, chunk, params, truncated_reward)
        records = []
        for i, (row, text, result) in enumerate(zip(repeated, rollout.texts, results)):
            if row["id"] in skip:
                continue
            records.append({
                "model": model.label, "model_path": model.path, "step": model.step,
                "env": spec.label, "env_name": spec.name, "split": spec.split,
                "prompt_id": row["id"], "sample": i % params.n, "messages": env.messages(row),
                # no gold mapped (env=dataset whose reward reads another column): null, not a "" that reads as
                # an empty gold; that row's data columns, which a python reward reads, go with it
                "answer": row.get("answer") or None, **({"columns": row["columns"]} if "columns" in row else {}),
                "completion": text, **result.to_dict(),
                "vote": vote_of(result.details, text),
                "response_tokens": len(rollout.completion_ids[i]), "truncated": bool(rollout.truncated[i]),
            })
        yield records


_VOTE_KEYS = ("pred", "extracted", "expression", "code")  # math's normalised answer first
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def vote_of(details: dict, completion: str) -> str | None:
    """The answer a sample votes for in maj@k (None: it gave none).

    Rule: in the details of the verifier that decides the task (a composite's first component), the
    first present of `pred` (math: normalised answer), `extracted` (exact), `expression` (countdown),
    `code` (code); else the last `<answer>...</answer>` of the completion. Plain numbers are
    canonicalised (`007`, `7.0` -> `7`)."""
    parts = details.get("components")
    inner = next(iter(parts.values()))["details"] if parts else details
    vote = next((inner[k] for k in _VOTE_KEYS if inner.get(k) not in (None, "", [])), None)
    if vote is None:
        tags = _ANSWER_TAG.findall(completion)
        vote = tags[-1] if tags and tags[-1].strip() else None
    if vote is None:
        return None
    vote = vote.strip() if isinstance(vote, str) else json.dumps(vote, sort_keys=True)
    if _NUMBER.match(vote):
        number = float(vote)
        vote = str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)
    return vote


def _longest_row(tokenizer, envs: dict, rows: dict, lengths: dict) -> int | None:
    """The longest prompt plus its env's max_new_tokens over every env evaluated (what a vLLM KV cache of
    `rollout.vllm.kv_cache_bytes=auto` is sized for); None (the model's context) when a multi-turn env is among them."""
    from rlvr.envs.multi_turn import is_multi_turn

    if any(is_multi_turn(env) for env in envs.values()):
        return None
    longest = [max(prompt_lengths(tokenizer, envs[label], rows[label]), default=0) + lengths[label][0]
               for label in rows if rows[label]]
    return max(longest, default=None)


def sampling_params(cfg) -> SamplingParams:
    greedy = cfg.temperature == 0
    return SamplingParams(n=cfg.n_samples, max_new_tokens=cfg.rollout.max_new_tokens,
                          temperature=1.0 if greedy else cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                          stop=tuple(cfg.rollout.stop), greedy=greedy,
                          **generation_settings(cfg.rollout))  # rollout.repetition_penalty, min_p, generation_kwargs


def env_lengths(cfg, envs: dict) -> dict[str, tuple[int, str]]:
    """Per env label: (max_new_tokens, truncated_reward), each the command's when given, else the env's own
    (conf/rollout/*.yaml's default reads one `env`; with `envs=[...]` each environment gets its own)."""
    def given(key):
        return None if OmegaConf.is_interpolation(cfg.rollout, key) else cfg.rollout[key]

    lengths = {label: (given("max_new_tokens") or int(env.default_max_new_tokens),
                       given("truncated_reward") or env.truncated_reward) for label, env in envs.items()}
    for label, (_, mode) in lengths.items():
        if mode not in TRUNCATED_REWARDS:
            raise ConfigError(f"rollout.truncated_reward={mode!r}; choose one of {', '.join(TRUNCATED_REWARDS)}")
    return lengths


def settings_of(cfg, lengths: dict | None = None) -> dict:
    """The settings that decide which samples are drawn: a resumed run must match them. `max_new_tokens`
    is one number when every env has the same, else {env label: tokens}."""
    per_env = {label: n for label, (n, _) in (lengths or {}).items()}
    max_new_tokens = (next(iter(per_env.values())) if len(set(per_env.values())) == 1 else per_env) if per_env \
        else cfg.rollout.max_new_tokens
    return {"n_samples": cfg.n_samples, "temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k,
            "max_new_tokens": max_new_tokens, "stop": list(cfg.rollout.stop), "seed": cfg.seed,
            "batch_prompts": cfg.batch_prompts, "engine": "endpoint" if cfg.get("endpoint") else cfg.rollout.engine,
            **({"endpoint": cfg.endpoint} if cfg.get("endpoint") else {}),
            # named only when set (as prompt_format), so evals written before these keys still resume
            **{key: value for key, value in generation_settings(cfg.rollout).items() if value != OFF[key]},
            # other prompts draw other samples; named only when plain, so evals written before the key still resume
            **({"prompt_format": "plain"} if cfg.model.get("prompt_format") == "plain" else {})}


def _validate(cfg) -> None:
    for key in ("temperature", "top_p", "top_k"):  # conf/eval.yaml: rollout.KEY follows the top-level KEY
        if cfg.rollout[key] != cfg[key]:
            raise ConfigError(f"rollout.{key}={cfg.rollout[key]} is not read by rlvr eval: set {key}={cfg.rollout[key]} "
                              f"(the top-level key; rollout.{key} follows it)")
    if cfg.model.kind not in ("base", "instruct"):
        raise ConfigError(f"model.kind={cfg.model.kind!r} must be base or instruct (which prompt the built-in "
                          f"environments give the models)")
    if cfg.model.prompt_format not in ("chat", "plain"):
        raise ConfigError(f"model.prompt_format={cfg.model.prompt_format!r}; choose one of chat, plain")
    # rollout.repetition_penalty, min_p, generation_kwargs: refused by name where the engine cannot honour them
    check_generation_settings("server" if cfg.endpoint else cfg.rollout.engine, cfg.rollout)
    if cfg.n_samples < 1:
        raise ConfigError(f"n_samples must be >= 1, got {cfg.n_samples}")
    if cfg.temperature < 0:
        raise ConfigError(f"temperature must be >= 0 (0 = greedy), got {cfg.temperature}")
    if cfg.temperature == 0 and cfg.n_samples > 1:
        raise ConfigError(f"temperature=0 is greedy decoding, which gives n_samples={cfg.n_samples} identical "
                          "completions: set temperature > 0 or n_samples=1")
    if cfg.n_prompts is not None and cfg.n_prompts < 1:
        raise ConfigError(f"n_prompts must be >= 1 or null (every row), got {cfg.n_prompts}")
    if cfg.batch_prompts < 1:
        raise ConfigError(f"batch_prompts must be >= 1, got {cfg.batch_prompts}")
    if cfg.endpoint:
        if not str(cfg.endpoint).startswith(("http://", "https://")):
            raise ConfigError(f"endpoint={cfg.endpoint!r} must be a server's base URL, e.g. http://127.0.0.1:8000/v1")
        if len(model_specs(cfg)) != 1:
            raise ConfigError("endpoint=URL serves one model: give it as model.name_or_path=DIR (its tokenizer), "
                              "not several models or a run directory")


def _check_settings(out: Path, settings: dict) -> None:
    path = out / SETTINGS
    if path.exists():
        before = json.loads(path.read_text())
        changed = [f"{k}: {before.get(k)!r} -> {v!r}" for k, v in settings.items() if before.get(k) != v]
        if changed:
            raise ConfigError(f"output_dir={out} holds an eval with other settings ({'; '.join(changed)}); "
                              "resume with the same settings or choose a new output_dir")
    else:
        path.write_text(json.dumps(settings, indent=2) + "\n")


def _read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill mid-write; its item is redone
            pass
    return records


def _load_done(path: Path, n_samples: int) -> set[tuple[str, str, str]]:
    """Items with all samples written; the file is rewritten without partial items and torn lines."""
    records = _read_records(path)
    lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    counts: dict[tuple, set] = {}
    for r in records:
        counts.setdefault((r["model_path"], r["env"], r["prompt_id"]), set()).add(r["sample"])
    done = {key for key, samples in counts.items() if len(samples) == n_samples}
    kept = [r for r in records if (r["model_path"], r["env"], r["prompt_id"]) in done]
    if len(kept) != len(lines):
        path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return done


def tokenizer_format(cfg) -> dict:
    """`load_tokenizer`'s keywords for `model.prompt_format`: plain puts the plain-text template in place of the
    tokenizer's own, as rlvr train did (a run's checkpoints saved it; its base model, evaluated beside them, did not);
    chat keeps the tokenizer's template."""
    plain = cfg.model.prompt_format == "plain"
    return {"chat": plain, "prompt_format": cfg.model.prompt_format}


def _endpoint_factory(cfg):
    """`endpoint=URL`: the server samples; the checkpoint at `model.name_or_path` gives the tokenizer."""
    def factory(model: ModelSpec):
        from rlvr.trainer.models.model import load_tokenizer
        from rlvr.trainer.rollout.server import ServerEngine

        try:
            tokenizer = load_tokenizer(model.path, **tokenizer_format(cfg))
        except (OSError, ValueError) as error:
            raise ConfigError(f"endpoint={cfg.endpoint}: the tokenizer of model {model.path!r} does not load "
                              f"(prompts are sent as its token ids): {error}") from None
        return ServerEngine([cfg.endpoint], tokenizer, model_name=cfg.served_model,
                            request_timeout_s=cfg.request_timeout_s, endpoint_label="endpoint")

    return factory


def _hf_factory(cfg, envs: dict, rows: dict, lengths: dict):
    def factory(model: ModelSpec):
        from rlvr.trainer.models.model import load_policy, load_tokenizer
        from rlvr.trainer.rollout.factory import build_engine

        try:
            tokenizer, policy = load_tokenizer(model.path, **tokenizer_format(cfg)), load_policy(model.path)
        except (OSError, ValueError) as error:
            raise ConfigError(f"model {model.path!r} does not load: {error}") from None
        options = {**OmegaConf.to_container(cfg.rollout, resolve=True), "seed": cfg.seed,
                   "max_sequences": cfg.batch_prompts * cfg.n_samples,  # one generate call's rows (the KV cache's)
                   "max_row_tokens": _longest_row(tokenizer, envs, rows, lengths),
                   "log_dir": str(Path(cfg.output_dir) / "servers")}  # rollout=server: each server's log
        return build_engine(cfg.rollout.engine, policy, tokenizer, options)

    return factory
