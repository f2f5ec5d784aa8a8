"""`model=tiny`: a small Qwen2-architecture causal LM built offline, for CPU runs and tests.

Nothing is downloaded. The tokenizer is a byte-level BPE trained here on text the
environment generates (digits split one per token, as Qwen2's pre-tokenizer does), with a
Qwen-style chat template. The model is randomly initialised from a config, then given a
short supervised warm start on the environment's reference solutions (see `warm_start.py`)
so that RL begins from a policy that sometimes succeeds. The result is cached on disk under
a key that hashes everything that shaped it, so the second run loads it in a second.

What the key covers (`build_fingerprint`): whether the warm start trains on multi-turn transcripts
(`warm_start_data`, only present when it does, so one-turn keys are unchanged); the config (environment, architecture, warm start, seed);
the source of every rlvr module the build runs, found by following `rlvr` imports statically from
this file, the environment's class and the verifiers that score it (a change to the warm start, the
evaluation, the prompt rendering, the environment's rows or its scoring rebuilds the model); the
versions of Python, torch, transformers and tokenizers, whose kernels and initialisers change the
numbers; and the machine's architecture and the CPU kernel level torch dispatches to (AVX2, AVX512, ...). A cached model built by other code or libraries is
therefore never reused. The build itself is deterministic: two builds with the same key in two
empty caches give byte-identical weights, and so does a build killed part way and run again (the warm start
resumes from `<key>.partial.pt`, its last check's model and optimizer, written beside the entry).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import platform
import shutil
import sys
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from rlvr.trainer.models.cache import build_once, cache_key, cache_root
from rlvr.trainer.models.transcripts import has_transcripts

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def rlvr_sources(roots: list[str]) -> dict[str, str]:
    """{module: sha256 of its source} for `roots` and every rlvr module they import, followed statically
    (imports inside functions too), with the packages' `__init__` files on the way. A package reached only on the
    way (as the parent of a module) is imported, not called: only its module-level imports are followed (rlvr's
    own `__init__` imports its Python API lazily, inside a function, which the build never runs)."""
    found: dict[str, str] = {}
    wholly: set[str] = set()  # modules whose function-level imports have been followed
    todo = [(name, True) for name in roots]  # (module, follow the imports inside its functions too)
    while todo:
        name, whole = todo.pop()
        if not name.startswith("rlvr") or name in wholly or (name in found and not whole):
            continue
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # `from rlvr.m import name` where name is not a module
            continue
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        source = Path(spec.origin).read_bytes()
        found[name] = hashlib.sha256(source).hexdigest()
        if whole:
            wholly.add(name)
        todo += [(name.rsplit(".", 1)[0], False)] if "." in name else []
        tree = ast.parse(source)
        for node in ast.walk(tree) if whole else _outside_functions(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
                # `from package import submodule` runs the package's import-time code only; a function is called
                todo += [(node.module, not all(map(_is_module, names)))] + [(n, True) for n in names]
            elif isinstance(node, ast.Import):
                todo += [(alias.name, True) for alias in node.names]
    return dict(sorted(found.items()))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def _outside_functions(tree: ast.AST):
    """The nodes of `tree` that run on import: all but the bodies of its functions."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack += [child for child in ast.iter_child_nodes(node)
                  if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]


def build_fingerprint(env) -> dict:
    """What shapes the tiny model besides its config: code and library versions (module docstring)."""
    scorers = [type(component.verifier).__module__ for component in env.verifier.components]
    return {
        "sources": rlvr_sources([__name__, type(env).__module__, *scorers]),
        "python": ".".join(map(str, sys.version_info[:2])), "torch": torch.__version__,
        "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
        # the kernels torch dispatches to (AVX2, AVX512, ...) round differently: another level, another model
        "machine": platform.machine(), "cpu": torch.backends.cpu.get_cpu_capability(),
    }


def train_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in TAG_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def build_model(tokenizer, hidden_size: int, num_layers: int, num_heads: int, num_kv_heads: int,
                intermediate_size: int, max_positions: int, seed: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def tokenizer_corpus(env, num_rows: int, seed: int) -> list[str]:
    rows = env.rows("train", num_rows, seed=seed)
    text = [m["content"] for row in rows for m in env.messages(row)] + [row["reference"] for row in rows]
    if has_transcripts(env):  # the tool calls and outputs the warm start trains on
        text += [m["content"] for row in rows for m in env.reference_trajectory(row)]
    return text + ["system user assistant", "".join(chr(c) for c in range(32, 127))]


def tiny_model_path(env, env_config: dict, arch: dict, warm: dict, seed: int) -> Path:
    """Where the tiny model of this config, code and libraries is cached (built or not)."""
    return _cache_path(env_config, arch, warm, seed, build_fingerprint(env), has_transcripts(env))


def _cache_path(env_config: dict, arch: dict, warm: dict, seed: int, fingerprint: dict,
                transcripts: bool = False) -> Path:
    payload = {"env": env_config, "arch": arch, "warm_start": warm, "seed": seed, "build": fingerprint}
    if transcripts:  # a transcript warm start (tool calls) is another model; one-turn keys keep their old payload
        payload["warm_start_data"] = "transcripts"
    key = cache_key(payload)
    return cache_root() / "tiny" / key


def build_tiny(env, env_config: dict, arch: dict, warm: dict, seed: int, log=print) -> Path:
    """Return the directory of the tiny model for this env, building and caching it if needed. Processes that
    ask for the same model at once (parallel tests, two runs started together) build it once: the others
    wait on a lock file beside it and then load what the first one built. A build that was killed resumes its
    warm start from `<key>.partial.pt` (warm_start.py: progress is kept). A cached model whose warm start did not
    reach its target is reused as it is, with a warning saying so each time."""
    fingerprint = build_fingerprint(env)  # read once: sources edited during a long build do not change its key
    path = _cache_path(env_config, arch, warm, seed, fingerprint, has_transcripts(env))
    built = []
    build_once(path, "warm_start.json", lambda: built.append(_build(env, arch, warm, seed, fingerprint, path, log)),
               "tiny model", log)
    warning = short_of_target(path, reused=not built)
    if warning:
        log(warning)
    return path


def short_of_target(path: Path, reused: bool) -> str | None:
    """The line to log when the model at `path` did not reach its warm start's target (its warm_start.json's
    `outcome`: gave_up or max_steps), else None: a `WARNING:` when `reused` (the warm start's own warning was
    printed when it was built), else where it is cached and that reusing it will warn."""
    report = json.loads((path / "warm_start.json").read_text())
    outcome = report.get("outcome")
    if outcome not in ("gave_up", "max_steps"):
        return None
    low = report["target_accuracy"][0]
    how = (f"gave up at step {report['steps']}: {report['give_up_reason']}" if outcome == "gave_up"
           else f"ran its {report['steps']} steps")
    best = report.get("best_val_accuracy", report["val_accuracy"])
    if reused:
        return (f"WARNING: tiny model: the cached model at {path} did not reach its warm start's target {low:.0%} "
                f"(best validation accuracy {best:.1%}; it {how}); RL starts from it. Its warm_start.json has the "
                f"history; other model.warm_start.* settings build another model")
    return (f"tiny model: cached at {path} with its warm start's outcome ({outcome}, best {best:.1%} against "
            f"{low:.0%}) in warm_start.json; runs with these settings reuse it, each with a warning")


def _build(env, arch: dict, warm: dict, seed: int, fingerprint: dict, path: Path, log) -> None:
    from rlvr.trainer.warm_start import warm_start

    log(f"tiny model: building (key {path.name}); later runs reuse {path}")
    tokenizer = train_tokenizer(tokenizer_corpus(env, 2000, seed), arch["vocab_size"])
    model = build_model(tokenizer, arch["hidden_size"], arch["num_layers"], arch["num_heads"], arch["num_kv_heads"],
                        arch["intermediate_size"], arch["max_positions"], seed)
    log(f"tiny model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab {len(tokenizer)}")
    partial = path.with_name(path.name + ".partial.pt")  # the warm start's progress; a killed build resumes from it
    report = warm_start(model, tokenizer, env, seed=seed, log=log, checkpoint=partial, **warm)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "warm_start.json").write_text(json.dumps(report, indent=2))
    (tmp / "build.json").write_text(json.dumps(fingerprint, indent=2))  # what the key hashed
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)  # atomic: a killed build never leaves a half-written cache entry
    partial.unlink(missing_ok=True)
