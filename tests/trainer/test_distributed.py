"""trainer.strategy=ddp|fsdp2 (trainer/distributed.py): two CPU processes on gloo train to the same
weights as one process with the same global batch; metrics combine over ranks as one process
would log them; torchrun runs end to end (FSDP2, a vLLM engine per rank); the README's commands compose.

Rollouts must not depend on how prompts are split over ranks. Since 2026-11-30 training gives each prompt a
sampling seed of its own (`rollout.seed_per_prompt`, on by default), the same on every rank
(test_each_rank_draws_and_seeds_its_prompts_as_one_process_would), and vLLM samples from it; HF generate ignores
the seeds and draws each batch from torch's one RNG, so a 2-process `rollout=hf` run samples differently from a
1-process one, though from the same distribution. The parity runs therefore generate with
`PerPromptSeededEngine`: the real HF engine, one prompt at a time, seeded from the prompt's text and the
sampling call (a test-only wrapper).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS = 2  # step 1 already drops groups to DAPO's filter, so it resamples (and can leave a rank no rows)


# dapo exercises the zero-variance filter and its resampling (uneven rows per rank), mu=2 the old logprobs,
# beta the reference forward
DAPO = ["algo=dapo", "algo.beta=0.04", "algo.mu=2"]
# ppo: the value head outside DDP, whitening, GAE and the adaptive rule's KL over all ranks
PPO = ["algo=ppo", "algo.objective=penalty", "algo.beta=0.04", "algo.mu=2"]
# reinforce's batch-mean baseline: the mean over all ranks' rewards
REINFORCE_MEAN = ["algo=reinforce", "algo.baseline=mean"]
# online dpo: each rank pairs its own groups (some ranks none): pairs counted over ranks, empty micro-batches
DPO_ONLINE = ["algo=dpo", "algo.dpo_updates_per_round=2"]
# token-budget micro-batches (trainer/algos/token_budget.py) after DAPO's filter: each rank plans its own rows,
# so the ranks run different numbers of micro-batches (the fewer run empty ones)
DAPO_BUDGET = ["algo=dapo", "train.max_tokens_per_micro_batch=64"]
# the same with each micro-batch's rows packed into one row (trainer/models/packing.py)
DAPO_PACKED = [*DAPO_BUDGET, "train.pack_sequences=true"]


def _overrides(model_path: Path, output_dir: Path, strategy: str, algo: list[str] = DAPO) -> list[str]:
    return [
        # micro-batches of 4 give 4 micro-batches in one process, 2 per rank
        *algo, "rollout=hf", f"model.name_or_path={model_path}",
        "env.digits=1", "env.ops=[+]", f"train.steps={STEPS}", "train.prompts_per_step=4",
        "train.completions_per_prompt=4", "train.micro_batch_size=4", f"train.save_every={STEPS}",
        f"train.eval_every={STEPS}", "train.eval_prompts=4", "optim.lr=2e-3", "threads=1",
        f"output_dir={output_dir}", f"trainer.strategy={strategy}",
    ]


class PerPromptSeededEngine:
    """Samples each prompt alone under a seed of (prompt text, sampling call): independent of the rank split."""

    def __init__(self, inner):
        self.inner, self.tokenizer, self.calls = inner, inner.tokenizer, 0

    def sync_weights(self, model) -> None:
        self.inner.sync_weights(model)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def generate(self, prompts, params):
        if params.greedy:
            return self.inner.generate(prompts, params)
        from rlvr.trainer.rollout.types import Rollout
        from rlvr.trainer.seeding import derive_seed

        self.calls += 1
        parts = []
        for prompt in prompts:
            with torch.random.fork_rng():
                torch.manual_seed(derive_seed("test-engine", prompt, self.calls))
                parts.append(self.inner.generate([prompt], params))
        return Rollout(*([x for part in parts for x in getattr(part, name)]
                         for name in ("prompt_ids", "completion_ids", "texts", "logprobs", "truncated")))


def _train(cfg) -> dict:
    import rlvr.trainer.run as run
    import rlvr.trainer.setup as setup
    from rlvr.trainer.rollout.hf import HFEngine

    with pytest.MonkeyPatch.context() as mp:  # undone afterwards: the pytest process trains other runs too
        mp.setattr(setup, "build_engine",
                   lambda kind, model, tokenizer, options=None: PerPromptSeededEngine(HFEngine(model, tokenizer)))
        return run.train(cfg, log=lambda *a, **k: None)


def _launch(world: int, overrides: list[str], cwd: Path) -> None:
    """`world` ranks of this file's __main__ under `torchrun --standalone`, as a user launches them.

    torchrun's agent holds the rendezvous port itself: a port picked here and released before the ranks bind it
    could be taken by a concurrent test's store in between, and a rank that joined the wrong store waits forever.
    The ranks write to a file, not a pipe: a pipe nobody reads while the test waits on another rank fills and
    blocks its writer in the middle of a collective. A run past the (far from reached) limit has its ranks print
    their stacks (faulthandler, SIGUSR1) before they are killed, so the failure says where they stood."""
    from tests.process_group import kill_group, popen_group

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world),
               __file__, json.dumps(overrides)]
    with tempfile.NamedTemporaryFile("w", prefix="ranks-", suffix=".log", dir=cwd, delete=False) as out:  # per launch
        log = Path(out.name)
        ranks = popen_group(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:  # a rank that hangs in a collective must fail the test, not the CI job
            ranks.wait(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(ranks.pid, signal.SIGUSR1)  # the ranks dump their stacks; the agent (no handler) ends
            time.sleep(5)
            pytest.fail(f"{world} ranks still running after 900 s; their output and stacks:\n" + log.read_text()[-6000:])
        finally:  # every rank, however the test ends (tests/process_group.py: also if this process is killed)
            kill_group(ranks)
    assert ranks.returncode == 0, log.read_text()[-6000:]


def _weights(run_dir: Path) -> dict:
    return load_file(run_dir / "checkpoints" / f"step_{STEPS}" / "model.safetensors")


@pytest.mark.slow
def test_two_ranks_train_to_the_single_process_weights(tiny_lm_sft, compose_train, tmp_path):
    single_run = tmp_path / "none"
    _train(compose_train(_overrides(tiny_lm_sft.path, single_run, "none")))  # in this process: one start-up less
    single = _metrics(single_run)
    assert max(m["dynamic_sampling/rounds"] for m in single[1:]) > 1, "the parity should cover DAPO's resampling"
    for strategy in ("ddp", "fsdp2"):
        _launch(2, _overrides(tiny_lm_sft.path, tmp_path / strategy, strategy), tmp_path)
        _assert_same_training(single_run, tmp_path / strategy, tiny_lm_sft.path, strategy)


@pytest.mark.slow
@pytest.mark.parametrize("algo", [PPO, REINFORCE_MEAN, DPO_ONLINE, DAPO_BUDGET, DAPO_PACKED],
                         ids=["ppo", "reinforce-mean", "dpo-online", "dapo-token-budget", "dapo-packed"])
def test_two_ddp_ranks_train_ppo_dpo_and_batch_baselines_to_the_single_process_weights(tiny_lm_sft, compose_train,
                                                                                       tmp_path, algo):
    single_run = tmp_path / "none"
    _train(compose_train(_overrides(tiny_lm_sft.path, single_run, "none", algo)))
    _launch(2, _overrides(tiny_lm_sft.path, tmp_path / "ddp", "ddp", algo), tmp_path)
    _assert_same_training(single_run, tmp_path / "ddp", tiny_lm_sft.path, "ddp")
    if algo is not PPO:
        return
    one, two = (torch.load(run / "checkpoints" / f"step_{STEPS}" / "trainer_state.pt")["critic"]
                for run in (single_run, tmp_path / "ddp"))
    assert one["weight"].abs().sum() > 0, "the value head must have trained"
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=0, atol=1e-5, msg=name)


def _assert_same_training(single_run: Path, ranked_run: Path, start_path: Path, strategy: str) -> None:
    one, two, start = _weights(single_run), _weights(ranked_run), load_file(start_path / "model.safetensors")
    assert one.keys() == two.keys()
    moved = max((one[k] - start[k]).abs().max().item() for k in one)
    assert moved > 1e-3, "training never moved the weights: the comparison would be empty"
    print(f"{strategy}: max |2 ranks - 1 process| =",
          max((two[k] - one[k]).abs().max().item() for k in one), "; max |trained - start| =", moved)
    for name in one:  # float32 sums in another order: far below the >1e-3 the weights moved
        torch.testing.assert_close(two[name], one[name], rtol=0, atol=1e-5, msg=name)

    single, ranked = _metrics(single_run), _metrics(ranked_run)
    assert [m["step"] for m in ranked] == [m["step"] for m in single] == list(range(STEPS + 1))  # logged once
    for a, b in zip(single[1:], ranked[1:]):  # reduced over ranks, the step's metrics are the one-process ones
        compared = [key for key in a if not key.startswith("time/") and key != "tokens_per_s"]  # wall clock
        assert "loss" in compared and set(compared) <= set(b), (strategy, sorted(set(compared) - set(b)))
        for key in compared:  # the engine/trainer gap is float noise itself (~1e-6), its batch layout differs
            noise = 1e-5 if key.startswith("rollout/logprob_diff") else 1e-6
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=noise), (strategy, a["step"], key)


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_offline_dpo_on_two_fsdp2_ranks_trains_to_the_single_process_weights(tiny_lm_sft, compose_train, tmp_path):
    """Offline DPO: each rank trains on a contiguous share of the step's pairs (7 a step: 4 and 3)."""
    from tests.trainer.algos.test_dpo_train import _scored_records, _write

    data = _write(tmp_path / "completions.jsonl", _scored_records())
    offline = ["algo=dpo", f"data={data}", "algo.pairs_per_step=7"]
    single_run = tmp_path / "none"
    _train(compose_train(_overrides(tiny_lm_sft.path, single_run, "none", offline)))
    _launch(2, _overrides(tiny_lm_sft.path, tmp_path / "fsdp2", "fsdp2", offline), tmp_path)
    _assert_same_training(single_run, tmp_path / "fsdp2", tiny_lm_sft.path, "fsdp2")


def test_combine_metrics_by_hand():
    from rlvr.trainer.distributed import combine_metrics

    # rank 0 rewards [1, 0, 0, 0]: mean 0.25, std sqrt(0.75 / 3) = 0.5; rank 1 rewards [1, 1, 1, 0]: mean 0.75, std 0.5
    # all eight [1, 0, 0, 0, 1, 1, 1, 0]: mean 0.5, var = 8 * 0.25 / 7 = 2/7
    rank0 = {"step": 3, "reward/mean": 0.25, "reward/std": 0.5, "loss": 0.1, "time/generate": 2.0, "lr": 1e-3,
             "rollout/logprob_diff_max": 0.3, "grad_norm": 1.5, "status/correct": 0.25, "status/incorrect": 0.75}
    rank1 = {"step": 3, "reward/mean": 0.75, "reward/std": 0.5, "loss": -0.4, "time/generate": 3.0, "lr": 1e-3,
             "rollout/logprob_diff_max": 0.2, "grad_norm": 1.5, "kl": 0.01,  # rank 0 kept no rows: no kl there
             "status/correct": 0.75, "status/timeout": 0.25}  # no incorrect completion on rank 1: no key
    out = combine_metrics([rank0, rank1], completions_per_rank=4)
    assert out["reward/mean"] == 0.5
    assert out["reward/std"] == pytest.approx((2 / 7) ** 0.5)
    assert out["loss"] == pytest.approx(-0.3)  # each rank's loss is its share of the whole batch's: they add
    assert out["kl"] == 0.01
    assert out["time/generate"] == 3.0 and out["rollout/logprob_diff_max"] == 0.3
    assert out["step"] == 3 and out["lr"] == 1e-3 and out["grad_norm"] == 1.5
    # shares of each rank's 4 completions: a missing status is a share of 0
    # (8 completions: 4 correct, 3 incorrect, 1 timeout)
    assert (out["status/correct"], out["status/incorrect"], out["status/timeout"]) == (0.5, 0.375, 0.125)


def test_each_rank_draws_and_seeds_its_prompts_as_one_process_would(tiny_lm_sft, compose_train, monkeypatch):
    """Rank r of W gets rows r*B..(r+1)*B-1 of the one-process draw, and the same per-prompt sampling seeds
    for them (vLLM samples from those: tests/trainer/rollout/test_rollout_vllm.py), so no sample depends on the world size."""
    from rlvr.trainer.experience import collect as sampling
    from rlvr.trainer.distributed import RankShardEnv
    from tests.trainer.test_trainer_step import STEP_OVERRIDES, AlternatingRewardEnv, _context

    class Recording:
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def generate(self, prompts, params):
            self.calls.append((list(prompts), params.seeds))
            return self.inner.generate(prompts, params)

    def draw(prompts_per_step: int, rank: int, world: int, extra=()):
        cfg = compose_train(STEP_OVERRIDES + [f"train.prompts_per_step={prompts_per_step}", *extra])
        env = AlternatingRewardEnv(digits=1, ops=["+"])
        ctx = _context(cfg, env if world == 1 else RankShardEnv(env, rank, world), tiny_lm_sft, 0.0)
        ctx.engine = Recording(ctx.engine)
        monkeypatch.setattr(sampling, "rank", lambda: rank)
        for round_ in (0, 1):  # the step's draw and a dynamic-sampling round
            sampling.sample_and_score(ctx, step=3, timings={}, round_=round_)
        return ctx.engine.calls

    whole = draw(4, 0, 1)
    for r in (0, 1):
        share = draw(2, r, 2)
        for (prompts, seeds), (all_prompts, all_seeds) in zip(share, whole):
            assert prompts == all_prompts[2 * r : 2 * r + 2] and seeds == all_seeds[2 * r : 2 * r + 2]
    assert len(set(whole[0][1] + whole[1][1])) == 8, "every prompt of every round has its own seed"
    assert all(seeds is None for _, seeds in draw(4, 0, 1, ["rollout.seed_per_prompt=false"]))  # the engine's RNG


def test_empty_rank_batch_reaches_every_parameter_with_zero_gradient(tiny_lm):
    """A rank with no rows runs one dummy row: every parameter gets a gradient (DDP/FSDP2 hooks fire), all zero."""
    from rlvr.trainer.distributed import RankModel
    from rlvr.trainer.models.logprobs import PackedBatch, token_logprobs

    model = RankModel(tiny_lm.model())
    no_rows = torch.zeros((0, 6), dtype=torch.long)  # [0, L]
    empty = PackedBatch(no_rows, no_rows, torch.zeros((0, 5)))
    logprobs, _ = token_logprobs(model, empty)
    assert logprobs.shape == (0, 5)
    logprobs.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) == 0, name


def test_strategy_config_errors(compose_train, tmp_path):
    from rlvr.trainer.distributed import Parallel
    from rlvr.trainer.validate import validate_train_config, validate_world_size
    from rlvr.errors import ConfigError

    validate_train_config(compose_train(["algo=dpo", "trainer.strategy=fsdp2"]))  # dpo runs under both
    with pytest.raises(ConfigError, match=r"trainer.strategy=ddp supports .* not algo=trpo"):
        validate_train_config(compose_train(["algo=trpo", "trainer.strategy=ddp"]))
    with pytest.raises(ConfigError, match=r"trainer.strategy=fsdp2 supports .* not algo=ppo .* or ddp"):
        validate_train_config(compose_train(["algo=ppo", "trainer.strategy=fsdp2"]))
    with pytest.raises(ConfigError, match=r"algo.critic=model with trainer.strategy=ddp"):
        validate_train_config(compose_train(["algo=ppo", "algo.critic=model", "trainer.strategy=ddp"]))
    validate_train_config(compose_train(["algo=ppo", "trainer.strategy=ddp"]))  # the value head: supported
    with pytest.raises(ConfigError, match=r"trainer.strategy='zero3'"):
        validate_train_config(compose_train(["trainer.strategy=zero3"]))
    with pytest.raises(ConfigError, match=r"train.prompts_per_step=6 must divide by the number of processes \(WORLD"):
        validate_world_size(compose_train(["train.prompts_per_step=6", "trainer.strategy=ddp"]), 4)
    with pytest.MonkeyPatch.context() as mp:
        for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            mp.delenv(key, raising=False)
        with pytest.raises(ConfigError, match=r"trainer.strategy=fsdp2 runs under torchrun"):
            Parallel.from_env("fsdp2")
        mp.setenv("WORLD_SIZE", "2")
        with pytest.raises(ConfigError, match=r"trainer.strategy=none but torchrun started WORLD_SIZE=2"):
            Parallel.from_env("none")


def test_readme_torchrun_commands_compose(compose_train):
    """The docs' torchrun commands (one machine, several; docs/scaling/torchrun.md): what follows `rlvr train`
    composes to a data-parallel config (torchrun's own flags never reach rlvr)."""
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    readme = "\n".join(page.read_text() for page in pages).replace("\\\n", " ")
    commands = [line.split() for line in readme.splitlines() if line.startswith("torchrun ")]
    assert any("--standalone" in c for c in commands) and any("--rdzv_endpoint" in c for c in commands)
    for command in commands:
        overrides = [arg for arg in command[command.index("train") + 1 :] if arg != "..."]
        cfg = compose_train(overrides)
        assert cfg.trainer.strategy in ("ddp", "fsdp2"), command


@pytest.mark.slow
def test_torchrun_end_to_end_with_one_vllm_engine_per_rank(tiny_lm, require_vllm, tmp_path):
    """torchrun with 2 ranks, FSDP2 and rollout=vllm: one metrics.jsonl, one consolidated checkpoint that
    from_pretrained loads. Each rank's vLLM engine starts from its own copy of the model (transformers 5
    saves on rank 0 only under torch.distributed; the engine writes on every rank), follows the policy's
    consolidated weights after each update, and shuts down before the process group, without an error."""
    from transformers import AutoModelForCausalLM

    from rlvr.trainer.models.tiny_model import build_model
    from tests.process_group import run_group
    from tests.trainer.rollout.test_rollout_vllm import VLLM_ARCH

    model_dir = tmp_path / "model"  # head_dim 32, as vLLM's CPU attention needs; untrained is enough here
    build_model(tiny_lm.tokenizer, **VLLM_ARCH, seed=0).save_pretrained(model_dir)
    tiny_lm.tokenizer.save_pretrained(model_dir)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "rlvr", "train", "trainer.strategy=fsdp2", "rollout=vllm", f"model.name_or_path={model_dir}",
               "env.digits=1", "env.ops=[+]", "train.steps=2", "train.prompts_per_step=2",
               "train.completions_per_prompt=4", "train.eval_prompts=4", "rollout.max_new_tokens=8",
               f"output_dir={out}", "threads=1"]
    result = run_group(command, timeout=600, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2]
    assert all(m["rollout/logprob_diff_max"] < 1e-4 for m in lines[1:])  # the engines follow the updated policy
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_2"]
    model = AutoModelForCausalLM.from_pretrained(out / "checkpoints" / "step_2")
    assert model.config.architectures == ["Qwen2ForCausalLM"]
    assert json.loads((out / "summary.json").read_text())["steps"] == 2

@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_torchrun_with_asynchronous_rollouts(tmp_path, strategy):
    """torchrun with 2 ranks and rollout.max_staleness=2 on rollout=hf (each rank's producer samples in a child
    process of its own) with DAPO, whose further rounds are drawn at once on every rank: it finishes, every
    step's samples (over both ranks) are at most 2 versions old, the further rounds ran, and one consolidated
    checkpoint is written. With DDP the run stops after step 2's checkpoint and `resume=` takes it to step 4: the
    resumed session's producers start empty (its first step trains on the checkpoint's own weights, staleness 0)
    and every step is logged once."""
    from tests.process_group import run_group

    out = tmp_path / "run"
    resumed = strategy == "ddp"
    base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "rlvr",
            "train"]
    first = [*base, f"trainer.strategy={strategy}", "rollout=hf", "rollout.max_staleness=2", "algo=dapo",
             "env.digits=1", "model.warm_start.max_steps=20", f"train.steps={2 if resumed else 4}",
             f"train.save_every={2 if resumed else 4}", "train.prompts_per_step=4", "train.completions_per_prompt=4",
             "train.eval_prompts=4", f"output_dir={out}", "threads=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RLVR_CACHE": str(tmp_path / "cache")}
    for command in [first] + ([[*base, f"resume={out}", "train.steps=4"]] if resumed else []):
        result = run_group(command, timeout=600, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2, 3, 4]
    trained = lines[1:]
    assert trained[0]["async/staleness_mean"] == 0
    if resumed:
        assert trained[2]["async/staleness_mean"] == 0  # step 3, the resumed session's first
    for m in trained:
        assert 0 <= m["async/staleness_mean"] <= 2
        assert sum(m[f"async/staleness_{s}"] for s in range(3)) == pytest.approx(1.0)
    assert any(m["async/staleness_mean"] > 0 for m in trained)  # the producers ran ahead
    assert any(m["dynamic_sampling/rounds"] > 1 for m in trained)  # and further rounds were drawn
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == (["step_2", "step_4"] if resumed else ["step_4"])


if __name__ == "__main__":  # one rank of `_launch`: only this file's folder is on sys.path, so the repository's
    import faulthandler  # root goes first, and tests/conftest.py imports as `tests.conftest`

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.conftest import _compose_train

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `_launch` asks for the stacks of a rank that hangs
    torch.set_num_threads(1)
    _train(_compose_train(json.loads(sys.argv[1])))
