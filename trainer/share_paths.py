"""A checkpoint folder shareable as it is: no path of the machine that wrote it, in any of its files.

A saved checkpoint's text (its model card's command lines and base model, `rlvr_config.yaml`'s output_dir and data
files, peft's `base_model_name_or_path`, the tokenizer's and config's `name_or_path`) and the two strings of its
`trainer_state.pt` that are paths or command lines (`base_model`, `commands`) name the run directory, the model
caches, HOME and the temporary directory. Each of those roots is written as a token instead, the longest first:

    the run directory            -> <run_dir>          RLVR_CACHE (built models)   -> <rlvr_cache>
    Hugging Face's hub cache     -> <hf_cache>         the temporary directory     -> <tmp>
    the working directory        -> (the path relative to it, as typed)
    HOME                         -> ~

`local_path` reads a recorded path back (`<run_dir>` from the checkpoint's own place, the others from this
machine's), so a resume still finds a cached base model. A token that reads back to nothing (a data file in another
machine's temporary directory) fails loudly where the path is opened. `rlvr eval` of a checkpoint inside its run
reads the run's own config.yaml, which keeps the real paths (trainer/evaluation/run_config.py).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

# what a checkpoint holds as bytes: weights and the pickled trainer state (rewritten by its two string entries only)
BINARY_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".model")
# a vocabulary's pieces are text, not paths: a piece "/tmp" rewritten would change the tokenizer
VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "merges.txt", "added_tokens.json")


def roots(run_dir: Path) -> list[tuple[str, str]]:
    """(machine path, what it is written as), longest path first, so a run directory under /tmp is <run_dir>."""
    from rlvr.trainer.models.cache import cache_root

    named = [(run_dir, "<run_dir>"), (cache_root(), "<rlvr_cache>"), (_hf_cache(), "<hf_cache>"),
             (Path(tempfile.gettempdir()), "<tmp>"), (Path.cwd(), ""), (Path.home(), "~")]
    out: dict[str, str] = {}
    for path, token in named:
        for variant in {os.path.abspath(path), str(Path(path).resolve())}:  # never a relative name: "run" is a word
            if variant not in ("/", "", ".") and variant not in out:
                out[variant] = token
    return sorted(out.items(), key=lambda item: -len(item[0]))


def _hf_cache() -> Path:
    try:
        from huggingface_hub.constants import HF_HUB_CACHE

        return Path(HF_HUB_CACHE)
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return Path.home() / ".cache" / "huggingface" / "hub"


def shareable(text: str, run_dir: Path) -> str:
    """`text` with each machine root written as its token (module docstring)."""
    for path, token in roots(run_dir):
        # the root as a whole path component: /tmp/x and "/tmp" match, /tmpfoo does not
        pattern = re.compile(re.escape(path) + r"(?![\w.-])")
        if token:
            text = pattern.sub(lambda _: token, text)
        else:  # the working directory: what follows it, relative as the user typed it (`/`-prefixed: drop the `/`)
            text = re.sub(re.escape(path) + r"/(?=[\w.~<-])", "", text)
            text = pattern.sub(".", text)
    return text


def local_path(text: str | None, run_dir: Path) -> str | None:
    """A path `shareable` wrote, as a path on this machine."""
    return local_text(text, run_dir) if text else text


def local_text(text: str, run_dir: Path) -> str:
    """`text` with each token `shareable` wrote as this machine's path (`~` where a path begins)."""
    from rlvr.trainer.models.cache import cache_root

    tokens = {"<run_dir>": run_dir, "<rlvr_cache>": cache_root(), "<hf_cache>": _hf_cache(),
              "<tmp>": Path(tempfile.gettempdir())}
    for token, path in tokens.items():
        text = text.replace(token, str(path))
    return re.sub(r"(?<![\w.~/-])~(?=/)", lambda _: os.path.expanduser("~"), text)


def share_folder(folder: Path, run_dir: Path) -> None:
    """Rewrite the text files under `folder` with `shareable`: the card and YAML whole; in a JSON file (config.json's
    `_name_or_path`, peft's `base_model_name_or_path`) each string value that is an absolute or `~` path, so no
    other text changes; vocabularies, weights and pickles not at all (the caller writes trainer_state.pt's)."""
    for path in folder.rglob("*"):
        if not path.is_file() or path.suffix in BINARY_SUFFIXES or path.name in VOCABULARY_FILES:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:  # a binary file by another name: no text to rewrite
            continue
        new = _share_json(text, run_dir) if path.suffix == ".json" else shareable(text, run_dir)
        if new != text:
            path.write_text(new)


def _share_json(text: str, run_dir: Path) -> str:
    def walk(value):
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str) and value.startswith(("/", "~")):
            return shareable(value, run_dir)
        return value

    try:
        data = json.loads(text)
    except ValueError:  # not JSON after all: left as it is
        return text
    shared = walk(data)
    return text if shared == data else json.dumps(shared, indent=2, ensure_ascii=False) + "\n"
