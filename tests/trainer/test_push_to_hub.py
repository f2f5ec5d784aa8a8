"""A checkpoint folder shared as it is (trainer/share_paths.py, trainer/model_card.py) and `train.push_to_hub`
(trainer/hub.py). No Hub is reachable here: huggingface_hub's two calls (`HfApi.create_repo`, `HfApi.upload_folder`)
are replaced by fakes that record their arguments and copy the folder as upload_folder would send it; the copy is
then loaded for real."""

from __future__ import annotations

import fnmatch
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

import rlvr
from tests.cli_run import tiny_train


class FakeHub:
    """HfApi's create_repo and upload_folder: each upload's folder copied (ignore_patterns honoured) to `store`."""

    def __init__(self, store: Path, fail: Exception | None = None):
        self.store, self.fail, self.repos, self.uploads = store, fail, [], []

    def install(self, monkeypatch):
        from huggingface_hub import HfApi, RepoUrl

        hub = self

        def create_repo(self, repo_id, *, private=None, exist_ok=False, repo_type=None, **kwargs):
            hub.repos.append({"repo_id": repo_id, "private": private, "exist_ok": exist_ok, "repo_type": repo_type})
            return RepoUrl(f"https://huggingface.co/{repo_id}")

        def upload_folder(self, *, repo_id, folder_path, ignore_patterns=None, **kwargs):
            if hub.fail is not None:
                raise hub.fail
            copy = hub.store / f"upload_{len(hub.uploads)}"
            for path in Path(folder_path).rglob("*"):
                relative = path.relative_to(folder_path).as_posix()
                if path.is_file() and not any(fnmatch.fnmatch(relative, p) for p in ignore_patterns or []):
                    (copy / relative).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, copy / relative)
            hub.uploads.append({"repo_id": repo_id, "folder_path": Path(folder_path), "copy": copy, **kwargs})

        monkeypatch.setattr(HfApi, "create_repo", create_repo)
        monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
        return self


def test_each_checkpoint_is_uploaded_complete_and_loadable(tiny_lm, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hub = FakeHub(tmp_path / "hub").install(monkeypatch)
    args = tiny_train(tiny_lm, "train.steps=2", "train.save_every=1", f"output_dir={tmp_path / 'run'}",
                      "train.push_to_hub=true", "train.hub_model_id=someone/tiny-grpo")[1:]
    lines = []
    run = rlvr.train(*args, log=lambda *a, **k: lines.append(" ".join(map(str, a))))
    assert [u["repo_id"] for u in hub.uploads] == ["someone/tiny-grpo"] * 2  # every save, as TRL's every_save
    assert [u["folder_path"] for u in hub.uploads] == [run.run_dir / "checkpoints" / f"step_{s}" for s in (1, 2)]
    assert hub.repos[0] == {"repo_id": "someone/tiny-grpo", "private": None, "exist_ok": True, "repo_type": "model"}
    uploaded = hub.uploads[-1]["copy"]
    names = {p.name for p in uploaded.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "README.md", "rlvr_config.yaml"} <= names
    assert "trainer_state.pt" not in names  # the optimizer state only resume reads
    model = AutoModelForCausalLM.from_pretrained(uploaded)
    tokenizer = AutoTokenizer.from_pretrained(uploaded)
    assert model.config.vocab_size == tiny_lm.model().config.vocab_size and tokenizer.chat_template
    front = yaml.safe_load((uploaded / "README.md").read_text().split("---\n")[1])
    assert front["library_name"] == "transformers"
    assert any("uploaded to https://huggingface.co/someone/tiny-grpo" in line for line in lines)


def test_the_repo_defaults_to_the_run_directory_name(tiny_lm, tmp_path, monkeypatch):
    hub = FakeHub(tmp_path / "hub").install(monkeypatch)
    args = tiny_train(tiny_lm, "train.steps=1", f"output_dir={tmp_path / 'my-run'}", "train.push_to_hub=true",
                      "train.hub_private_repo=true")[1:]
    rlvr.train(*args, log=lambda *a, **k: None)
    assert hub.repos == [{"repo_id": "my-run", "private": True, "exist_ok": True, "repo_type": "model"}]


def test_a_failed_upload_warns_with_cause_and_path_and_keeps_the_checkpoint(tiny_lm, tmp_path, monkeypatch):
    FakeHub(tmp_path / "hub", fail=ConnectionError("the Hub is unreachable")).install(monkeypatch)
    args = tiny_train(tiny_lm, "train.steps=1", f"output_dir={tmp_path / 'run'}", "train.push_to_hub=true",
                      "train.hub_model_id=someone/x")[1:]
    lines = []
    run = rlvr.train(*args, log=lambda *a, **k: lines.append(" ".join(map(str, a))))
    warned = [line for line in lines if "push_to_hub" in line]
    checkpoint = run.run_dir / "checkpoints" / "step_1"
    assert len(warned) == 1 and "ConnectionError: the Hub is unreachable" in warned[0]
    assert str(checkpoint) in warned[0] and "someone/x" in warned[0]
    assert run.checkpoint == checkpoint and (checkpoint / "model.safetensors").is_file()
    assert run.summary["steps"] == 1  # the run finished


def test_no_checkpoint_file_names_a_machine_path(tiny_lm, tmp_path, monkeypatch):
    """Every file of a saved checkpoint (weights and trainer_state.pt included, read as bytes) is free of the run
    directory, HOME, the temporary directory, the model caches and the working directory; the card names the engine
    that ran. The base model sits under HOME and the run under /tmp, so both would be written as they are."""
    from rlvr.trainer.models.cache import cache_root

    real_home, home = str(Path.home()), tmp_path / "home"
    model_dir = home / "models" / "tiny"
    shutil.copytree(tiny_lm.path, model_dir)
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = [a for a in tiny_train(tiny_lm, "train.steps=1", f"output_dir={tmp_path / 'run'}", "model.lora.r=4")[1:]
            if not a.startswith("model.name_or_path=")] + [f"model.name_or_path={model_dir}"]
    run = rlvr.train(*args, log=lambda *a, **k: None)
    from huggingface_hub.constants import HF_HUB_CACHE

    machine = {str(run.run_dir), str(home), real_home, HF_HUB_CACHE, "/tmp", tempfile.gettempdir(), str(cache_root()), str(work),
               str(tmp_path)}
    files = [p for p in run.checkpoint.rglob("*") if p.is_file()]
    assert {"trainer_state.pt", "adapter_config.json", "README.md", "rlvr_config.yaml"} <= {p.name for p in files}
    found = [(p.relative_to(run.checkpoint).as_posix(), path) for p in files for path in machine
             if path.encode() in p.read_bytes()]
    assert found == []
    card = (run.checkpoint / "README.md").read_text()
    assert "`~/models/tiny`" in card and "sampled by rlvr's `hf` engine (Hugging Face generate)" in card
    from rlvr.trainer.checkpoint import saved_entries

    assert saved_entries(run.checkpoint, "base_model")["base_model"] == str(model_dir)  # read back for resume


def test_the_base_model_hub_id_is_named_where_known(tiny_lm, compose_train):
    from rlvr.trainer.model_card import model_card

    snapshot = "/data/hf/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/7ae557604adf67be"
    cfg = compose_train(["model=hf", f"model.name_or_path={snapshot}"])
    front = yaml.safe_load(model_card(cfg, 1, None, [], snapshot, tiny_lm.model()).split("---\n")[1])
    assert front["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct"  # a Hub download's folder: its id


@pytest.fixture(autouse=True)
def _no_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def test_sharing_rewrites_paths_not_vocabulary_or_other_text(tmp_path):
    """A vocabulary piece "/tmp" or a JSON string that merely mentions a root is not a path: rewriting it would change
    the tokenizer or the text; a path value and the card's text are rewritten."""
    import json

    from rlvr.trainer.share_paths import share_folder

    run = tmp_path / "run"
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"/tmp": 5}}}))
    (tmp_path / "config.json").write_text(json.dumps({"_name_or_path": str(run / "base"), "note": "under /tmp"}))
    (tmp_path / "README.md").write_text(f"trained in {run}, data in {tempfile.gettempdir()}/d.jsonl\n")
    share_folder(tmp_path, run)
    assert json.loads((tmp_path / "tokenizer.json").read_text()) == {"model": {"vocab": {"/tmp": 5}}}
    assert json.loads((tmp_path / "config.json").read_text()) == {"_name_or_path": "<run_dir>/base",
                                                                  "note": "under /tmp"}
    assert (tmp_path / "README.md").read_text() == "trained in <run_dir>, data in <tmp>/d.jsonl\n"
