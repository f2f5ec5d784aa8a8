"""Which base model a resume uses (trainer/run.py, trainer/models/model.py `resumed_base_path`): none for a full
fine-tune without a reference (policy and tokenizer come from the checkpoint); for LoRA's base weights or a KL
reference, the one the checkpoint recorded while it exists, else the base resolved again (rebuilt when it was a
cached model that is gone). tests/trainer/test_resume.py resumes a tiny-model run with an empty cache end to end."""

import pytest

import rlvr.trainer.run as run
import rlvr.trainer.setup as setup


def _overrides(tiny_lm, run_dir, *extra):
    return [f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1", "train.prompts_per_step=2",
            "train.completions_per_prompt=2", "train.micro_batch_size=4", "train.eval_prompts=4", "threads=1",
            f"output_dir={run_dir}", *extra]


@pytest.mark.parametrize("extra", [[], ["algo.beta=0.04"], ["model.lora.r=4", "algo.beta=0.04"]],
                         ids=["full", "full-kl", "lora-kl"])
def test_a_resume_never_resolves_a_base_model_it_recorded(tiny_lm, compose_train, tmp_path, monkeypatch, extra):
    if "model.lora.r=4" in extra:
        pytest.importorskip("peft")
    run.train(compose_train(_overrides(tiny_lm, tmp_path, "train.steps=1", *extra)), log=lambda *a, **k: None)
    resolved = []
    real = setup.resolve_model_path
    monkeypatch.setattr(setup, "resolve_model_path", lambda *a, **k: resolved.append(1) or real(*a, **k))
    run.train(compose_train(_overrides(tiny_lm, tmp_path, "train.steps=2", f"resume={tmp_path}", *extra)),
              log=lambda *a, **k: None)
    assert resolved == []
    from rlvr.trainer.checkpoint import saved_entries  # written shareably, read back as this machine's path

    state = saved_entries(tmp_path / "checkpoints" / "step_2", "base_model", "commands")
    assert state["base_model"] == str(tiny_lm.path)  # recorded on, for `rlvr eval RUN_DIR`'s base row
    assert [c["step"] for c in state["commands"]] == [0, 1]


def test_a_recorded_base_model_that_is_gone_is_resolved_again(compose_train, tmp_path, monkeypatch):
    import rlvr.trainer.models.model as model

    cfg = compose_train([])
    monkeypatch.setattr(model, "resolve_model_path", lambda cfg, env, log: str(tmp_path / "rebuilt"))
    (tmp_path / "kept").mkdir()
    logged = []
    assert model.resumed_base_path(cfg, None, str(tmp_path / "kept"), log=logged.append) == str(tmp_path / "kept")
    assert model.resumed_base_path(cfg, None, str(tmp_path / "gone"), log=logged.append) == str(tmp_path / "rebuilt")
    assert len(logged) == 1 and "is gone" in logged[0] and "may differ" in logged[0]
    assert model.resumed_base_path(cfg, None, None, log=logged.append) == str(tmp_path / "rebuilt")
    assert len(logged) == 1  # a checkpoint that recorded none: nothing to compare with
