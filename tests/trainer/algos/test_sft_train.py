"""`rlvr train algo=sft` end to end on the tiny model: two steps from each source (data=FILE, the references, RFT)
move every parameter; RFT from a model that is never right keeps nothing and makes no update; LoRA trains the
adapters only; two ranks (ddp, and fsdp2 for RFT) train to the weights of one process (tests/trainer/test_distributed.py's
harness)."""

import json

import pytest
from safetensors.torch import load_file

ENV = ["env.digits=1", "env.ops=[+]"]


def _overrides(model_path, output_dir, *algo):
    return ["algo=sft", *algo, "rollout=hf", f"model.name_or_path={model_path}", *ENV, "train.steps=2",
            "train.prompts_per_step=4", "train.completions_per_prompt=4", "train.micro_batch_size=2",
            "train.save_every=2", "train.eval_every=2", "train.eval_prompts=4", "optim.lr=1e-2", "threads=1",
            f"output_dir={output_dir}"]


def sft_file(path, n=12):
    """`n` one-digit additions as prompt/completion rows (chat messages), answered right."""
    from rlvr.envs import load_env

    env = load_env("arithmetic", digits=1, ops=["+"])
    rows = env.rows("train", n, seed=0)
    path.write_text("".join(json.dumps({"prompt": env.messages(r), "completion": [
        {"role": "assistant", "content": r["reference"]}]}) + "\n" for r in rows))
    return path


def _train(compose_train, overrides):
    from rlvr.trainer.run import train

    train(compose_train(overrides), log=lambda *a, **k: None)


def _metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _moved(run_dir, start_path):
    start, end = load_file(start_path / "model.safetensors"), load_file(run_dir / "checkpoints/step_2/model.safetensors")
    return {name: (end[name] - start[name]).abs().max().item() for name in start}


@pytest.mark.parametrize("source", ["data", "reference", "rft"])
def test_two_steps_from_each_source_move_every_parameter(tiny_lm_sft, compose_train, tmp_path, source):
    algo = {"data": [f"data={sft_file(tmp_path / 'sft.jsonl')}"], "reference": [],
            "rft": ["algo.source=rft", "algo.keep_per_prompt=2", "rollout.temperature=1.0"]}[source]
    _train(compose_train, _overrides(tiny_lm_sft.path, tmp_path / "run", *algo))
    steps = _metrics(tmp_path / "run")[1:]
    assert [m["step"] for m in steps] == [1, 2]
    updated = [m for m in steps if m["sft/updated"]]
    assert updated and all(m["loss"] > 0 and m["grad_norm"] > 0 for m in updated)
    if source == "rft":  # at most 2 of each prompt's 4 samples, and only when it was right
        assert all(m["rft/kept"] <= 2 * 4 for m in steps)
        assert all(m["rft/kept"] > 0 for m in updated)
    if source == "data":
        assert steps[-1]["data/epoch"] == pytest.approx(8 / 12)
    else:
        assert "data/epoch" not in steps[-1]
    assert "reward/mean" in steps[-1] if source == "rft" else "reward/mean" not in steps[-1]
    moved = _moved(tmp_path / "run", tiny_lm_sft.path)
    assert min(moved.values()) > 0, [name for name, change in moved.items() if change == 0]


def test_rft_with_nothing_right_makes_no_update_and_says_so(tiny_lm, compose_train, tmp_path):
    """A random model never answers in tags, so the verifier marks nothing correct: no row kept, no loss, the
    weights as they were."""
    _train(compose_train, _overrides(tiny_lm.path, tmp_path / "run", "algo.source=rft"))
    steps = _metrics(tmp_path / "run")[1:]
    assert [(m["sft/updated"], m["rft/kept"], m["rft/prompts_kept_frac"]) for m in steps] == [(0, 0, 0.0)] * 2
    assert not any("loss" in m or "grad_norm" in m for m in steps)
    assert max(_moved(tmp_path / "run", tiny_lm.path).values()) == 0


def test_sft_with_lora_trains_the_adapters_only(tiny_lm_sft, compose_train, tmp_path):
    pytest.importorskip("peft")  # the lora extra
    _train(compose_train, _overrides(tiny_lm_sft.path, tmp_path / "run", "model.lora.r=4"))
    adapter = tmp_path / "run/checkpoints/step_2/adapter"
    assert (adapter / "adapter_config.json").exists()
    weights = load_file(adapter / "adapter_model.safetensors")
    assert weights and all("lora_" in name for name in weights)
    lora_b = [tensor for name, tensor in weights.items() if "lora_B" in name]
    assert lora_b and all(t.abs().max() > 0 for t in lora_b), "B starts at 0: every adapter must have trained"
    assert max(_moved(tmp_path / "run", tiny_lm_sft.path).values()) > 0  # the merged checkpoint moved


@pytest.mark.slow
@pytest.mark.parametrize("source, strategy", [("data", "ddp"), ("reference", "ddp"), ("rft", "ddp"), ("rft", "fsdp2")])
def test_two_ranks_train_sft_to_the_single_process_weights(tiny_lm_sft, compose_train, tmp_path, source, strategy):
    from tests.trainer.test_distributed import _assert_same_training, _launch, _overrides as ranked_overrides, _train as one

    algo = {"data": ["algo=sft", f"data={sft_file(tmp_path / 'sft.jsonl')}"], "reference": ["algo=sft"],
            "rft": ["algo=sft", "algo.source=rft", "algo.keep_per_prompt=2"]}[source]
    one(compose_train(ranked_overrides(tiny_lm_sft.path, tmp_path / "none", "none", algo)))
    _launch(2, ranked_overrides(tiny_lm_sft.path, tmp_path / strategy, strategy, algo), tmp_path)
    _assert_same_training(tmp_path / "none", tmp_path / strategy, tiny_lm_sft.path, strategy)
    if source == "rft":  # each rank kept from its own prompts: the parity covers uneven rows per rank
        kept = [m["rft/kept"] for m in _metrics(tmp_path / "none")[1:]]
        assert any(k > 0 for k in kept), kept
