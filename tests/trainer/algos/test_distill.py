"""algo=distill (trainer/algos/distill.py, distill_loss.py, trainer/models/teacher.py): the per-token advantage and the
generalized JSD derived by hand, the JSD's parity with TRL's GKDTrainer on identical logits, a teacher with another
tokenizer refused at start in one line, two steps moving the student toward the teacher (with and without LoRA),
and two DDP ranks training to the one-process weights.

The teacher is the conftest's `tiny_lm_sft` (the tiny model after 60 supervised steps); the student is the same model
with noise added to every weight (`noisy_student`), so the two share a tokenizer and a format but disagree on every
token, and the student has somewhere to go."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.errors import ConfigError
from rlvr.trainer.algos.distill_loss import distill_advantages, generalized_jsd, sampled_token_loss


def test_advantage_is_teacher_minus_detached_student_logprob_by_hand():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -3.0, 0.0]], requires_grad=True)  # [N=2, T=3]
    teacher = torch.tensor([[-0.5, -2.5, -9.0], [-1.2, -1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # the last column is padding
    advantages, reverse_kl = distill_advantages(logprobs, teacher, mask)
    # reverse KL = log pi - log q: [-1 + 0.5, -2 + 2.5] = [-0.5, 0.5]; [-0.2 + 1.2, -3 + 1] = [1.0, -2.0]; padding 0
    assert reverse_kl.tolist() == [[-0.5, 0.5, 0.0], [1.0, -2.0, 0.0]]
    assert advantages.tolist() == [[0.5, -0.5, 0.0], [-1.0, 2.0, 0.0]]
    assert not advantages.requires_grad  # the student term is detached (Tinker's sampled logprobs are constants)
    # with the verifier reward's advantages [1, -2] at weight 0.5: + [0.5, -1] on each real token
    advantages, _ = distill_advantages(logprobs, teacher, mask, torch.tensor([1.0, -2.0]), reward_weight=0.5)
    assert advantages.tolist() == [[1.0, 0.0, 0.0], [-2.0, 1.0, 0.0]]


def test_sampled_token_loss_value_is_the_reverse_kl_and_its_gradient_minus_the_advantage():
    logprobs = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    teacher = torch.tensor([[-0.5, -3.0]])
    advantages, _ = distill_advantages(logprobs, teacher, torch.ones(1, 2))  # [[0.5, -1.0]]
    per_token = sampled_token_loss(logprobs, advantages)
    # ratio = 1 at the sampled weights: the value is -A = log pi - log q = [-0.5, 1.0]
    assert per_token.tolist() == [[-0.5, 1.0]]
    per_token.sum().backward()
    # d(-ratio * A)/d log pi = -A: the token the teacher likes more is pushed up, the other down
    assert logprobs.grad.tolist() == [[-0.5, 1.0]]


def test_generalized_jsd_by_hand():
    # one position over 2 tokens: student p = (1/2, 1/2) (logits 0, 0), teacher q = (1/4, 3/4) (logits 0, log 3)
    student = torch.tensor([[0.0, 0.0]])
    teacher = torch.tensor([[0.0, math.log(3.0)]])
    p, q = (0.5, 0.5), (0.25, 0.75)
    forward = q[0] * math.log(q[0] / p[0]) + q[1] * math.log(q[1] / p[1])  # KL(q || p) = 0.1308
    reverse = p[0] * math.log(p[0] / q[0]) + p[1] * math.log(p[1] / q[1])  # KL(p || q) = 0.1438
    assert generalized_jsd(student, teacher, beta=0.0).item() == pytest.approx(forward, rel=1e-6)
    assert generalized_jsd(student, teacher, beta=1.0).item() == pytest.approx(reverse, rel=1e-6)
    # beta = 0.5: m = (p + q) / 2 = (3/8, 5/8); JSD = 1/2 KL(q || m) + 1/2 KL(p || m)
    m = (0.375, 0.625)
    jsd = 0.5 * sum(qi * math.log(qi / mi) for qi, mi in zip(q, m)) + 0.5 * sum(pi * math.log(pi / mi)
                                                                             for pi, mi in zip(p, m))
    assert generalized_jsd(student, teacher, beta=0.5).item() == pytest.approx(jsd, rel=1e-6)  # 0.0338
    # temperature 2 halves the logits: teacher (0, log 3 / 2) -> q = (1 / (1 + sqrt 3), sqrt 3 / (1 + sqrt 3))
    q2 = (1 / (1 + math.sqrt(3)), math.sqrt(3) / (1 + math.sqrt(3)))
    expected = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q2))
    assert generalized_jsd(student, teacher, beta=1.0, temperature=2.0).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("beta", [0.0, 0.3, 0.5, 1.0])  # 0.3: 0.5 is symmetric in the two distributions
def test_generalized_jsd_matches_trl_gkd_on_identical_logits(beta):
    """TRL's GKDTrainer.generalized_jsd_loss (trl 1.16.0, trl.experimental.gkd) with labels masking padding and
    reduction="batchmean" (its sum over unmasked positions / their count) at temperature 0.7, against our per-token
    divergence averaged over the same positions: values and gradients on the student's logits."""
    pytest.importorskip("trl")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TRL's "experimental API" warning
        from trl.experimental.gkd import GKDTrainer
    generator = torch.Generator().manual_seed(0)
    student = torch.randn(3, 5, 11, generator=generator) * 2  # [B, T, V]
    teacher = torch.randn(3, 5, 11, generator=generator) * 2
    labels = torch.randint(0, 11, (3, 5), generator=generator)
    labels[0, 3:] = -100  # padding
    labels[2, 0] = -100  # a prompt position
    mask = labels != -100

    ours_logits = student.clone().requires_grad_(True)
    ours = generalized_jsd(ours_logits[mask], teacher[mask], beta, temperature=0.7).mean()
    ours.backward()
    theirs_logits = student.clone().requires_grad_(True)
    theirs = GKDTrainer.generalized_jsd_loss(theirs_logits, teacher, labels=labels, beta=beta, temperature=0.7,
                                             reduction="batchmean")
    theirs.backward()
    assert ours.item() > 1e-3  # the logits differ: an empty comparison would pass anything
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours_logits.grad, theirs_logits.grad, rtol=1e-4, atol=1e-7)


NOISE = 2.0  # at 1.0 the sampled-token loss's two noisy steps did not always lower the KL; 2.0 leaves a wide gap


@pytest.fixture(scope="module")
def noisy_student(tiny_lm_sft, tmp_path_factory):
    """`tiny_lm_sft` with Gaussian noise of NOISE x each weight tensor's std added (seeded), saved with its tokenizer."""
    model = tiny_lm_sft.model()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            scale = parameter.std() if parameter.numel() > 1 else parameter.abs()
            parameter.add_(torch.randn(parameter.shape, generator=generator) * NOISE * scale)
    path = tmp_path_factory.mktemp("noisy_student")
    model.save_pretrained(path)
    tiny_lm_sft.tokenizer.save_pretrained(path)
    return path


def _distill(student, teacher, out, *extra) -> list[str]:
    return ["algo=distill", f"algo.teacher={teacher}", "rollout=hf", f"model.name_or_path={student}",
            "env.digits=1", "env.ops=[+]", "train.steps=2", "train.prompts_per_step=4",
            "train.completions_per_prompt=4", "train.eval_prompts=4", "train.save_every=2", "train.eval_every=2",
            "optim.lr=1e-3", f"output_dir={out}", "threads=1", *extra]


def test_a_teacher_with_another_tokenizer_is_refused_at_start_in_one_line(tiny_lm, tmp_path, compose_train):
    from rlvr.trainer.models.tiny_model import build_model, tokenizer_corpus, train_tokenizer
    from rlvr.trainer.setup import build_run
    from tests.conftest import TINY_ARCH, arithmetic_env

    other = train_tokenizer(tokenizer_corpus(arithmetic_env(), 200, 1), 300)  # another BPE: 300 tokens
    teacher = tmp_path / "teacher"
    build_model(other, **TINY_ARCH, seed=1).save_pretrained(teacher)
    other.save_pretrained(teacher)
    cfg = compose_train(_distill(tiny_lm.path, teacher, tmp_path / "run"))
    with pytest.raises(ConfigError) as refused:
        build_run(cfg, log=lambda *a, **k: None)
    message = str(refused.value)
    assert "\n" not in message
    assert f"algo.teacher={teacher}" in message and f"model {tiny_lm.path}" in message
    assert len(other) != len(tiny_lm.tokenizer)
    assert f"({len(other)} tokens)" in message and f"{len(tiny_lm.tokenizer)} tokens" in message
    # the same model saved with the student's tokenizer is accepted (the check compares vocabularies, not paths)
    tiny_lm.tokenizer.save_pretrained(teacher)
    build_run(compose_train(_distill(tiny_lm.path, teacher, tmp_path / "run2")), log=lambda *a, **k: None)


def test_distill_config_errors_name_the_key(compose_train, tiny_lm):
    from rlvr.trainer.validate import validate_train_config

    from rlvr.trainer.models.teacher import teacher_path

    with pytest.raises(ConfigError, match=r"^algo.teacher is required for algo=distill"):
        teacher_path(compose_train(["algo=distill"]).algo.teacher)
    with pytest.raises(ConfigError, match=r"^algo.teacher=/no/such/teacher: no such file or directory$"):
        teacher_path("/no/such/teacher")
    base = ["algo=distill", f"algo.teacher={tiny_lm.path}"]
    with pytest.raises(ConfigError, match=r"algo.loss='forward'; choose one of reverse_kl, gkd"):
        validate_train_config(compose_train([*base, "algo.loss=forward"]))
    with pytest.raises(ConfigError, match=r"algo.jsd_beta=1.5 must be in \[0, 1\]"):
        validate_train_config(compose_train([*base, "algo.jsd_beta=1.5"]))
    with pytest.raises(ConfigError, match=r"algo.reward_weight=0.5 .* train.completions_per_prompt >= 2, not 1"):
        validate_train_config(compose_train([*base, "algo.reward_weight=0.5", "train.completions_per_prompt=1"]))


def _reverse_kl(student, teacher, rows) -> float:
    """Mean KL(student || teacher) over the vocabulary at every completion position of `rows` (a fixed batch)."""
    from rlvr.trainer.models.logprobs import run_forward

    with torch.no_grad():
        s, t = run_forward(student, rows).logits, run_forward(teacher, rows).logits
    return generalized_jsd(s, t, beta=1.0).mean().item()


def _student_samples(student, tokenizer, seed: int = 5):
    """16 completions the starting student samples for 8 test prompts (seeded), packed: the kind of rows distillation
    trains on, held fixed so the KL before and after training is measured at the same positions."""
    from rlvr.trainer.models.logprobs import pack
    from rlvr.trainer.rollout.hf import HFEngine
    from rlvr.trainer.rollout.prompts import render_prompts
    from rlvr.trainer.rollout.types import SamplingParams
    from tests.conftest import arithmetic_env

    env = arithmetic_env()
    prompts = render_prompts(tokenizer, env, env.rows("test", 8, seed=3))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        rollout = HFEngine(student, tokenizer).generate(prompts, SamplingParams(n=2, max_new_tokens=16, temperature=1.0))
    return pack(rollout.prompt_ids, rollout.completion_ids, tokenizer.pad_token_id)


@pytest.mark.parametrize("extra", [[], ["algo.loss=gkd", "algo.jsd_beta=1.0"], ["model.lora.r=4", "optim.lr=1e-2"],
                                   ["algo.reward_weight=0.5", "train.max_tokens_per_micro_batch=64",
                                    "train.pack_sequences=true", "train.micro_batch_size=4"]],
                         ids=["reverse_kl", "gkd", "lora", "reward-weight-packed"])
def test_two_distill_steps_move_the_student_toward_the_teacher(noisy_student, tiny_lm, tiny_lm_sft, compose_train,
                                                               tmp_path, extra):
    """Two steps of `rlvr train algo=distill`: the student's KL to the teacher falls on a fixed batch it never trained
    on (the test prompts' reference completions), and the logged sampled-token KL is the teacher's gap."""
    from transformers import AutoModelForCausalLM

    from rlvr.trainer.run import train

    out = tmp_path / "run"
    lines: list[str] = []
    train(compose_train(_distill(noisy_student, tiny_lm_sft.path, out, *extra)), log=lambda *a, **k: lines.append(
        " ".join(map(str, a))))
    assert any(line.startswith(f"teacher: {tiny_lm_sft.path} (") and "MiB float32" in line for line in lines)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2]
    for m in metrics[1:]:
        assert m["distill/teacher_logprob"] < 0 and math.isfinite(m["loss"]) and math.isfinite(m["distill/reverse_kl"])
    teacher = AutoModelForCausalLM.from_pretrained(tiny_lm_sft.path).eval()
    start = AutoModelForCausalLM.from_pretrained(noisy_student).eval()
    trained = AutoModelForCausalLM.from_pretrained(out / "checkpoints" / "step_2").eval()
    rows = _student_samples(start, tiny_lm.tokenizer)
    before, after = _reverse_kl(start, teacher, rows), _reverse_kl(trained, teacher, rows)
    print(f"{extra}: KL(student || teacher) {before:.4f} -> {after:.4f}")
    assert after < 0.9 * before


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["algo.loss=gkd", "algo.reward_weight=0.5", "train.max_tokens_per_micro_batch=64",
                                        "train.pack_sequences=true"]], ids=["reverse_kl", "gkd-reward-packed"])
def test_two_ddp_ranks_distill_to_the_single_process_weights(noisy_student, tiny_lm_sft, compose_train, tmp_path,
                                                             extra):
    """`torchrun --nproc_per_node 2 ... trainer.strategy=ddp algo=distill`: the weights and every logged metric equal
    one process's with the same global batch (tests/trainer/test_distributed.py's harness, as the GRPO presets). Here the
    student is `tiny_lm_sft`, whose groups have mixed rewards, so `reward_weight`'s advantage is not all zero."""
    from tests.trainer.test_distributed import _assert_same_training, _launch, _overrides, _train

    algo = ["algo=distill", f"algo.teacher={noisy_student}", *extra]
    single_run = tmp_path / "none"
    _train(compose_train(_overrides(tiny_lm_sft.path, single_run, "none", algo)))
    _launch(2, _overrides(tiny_lm_sft.path, tmp_path / "ddp", "ddp", algo), tmp_path)
    _assert_same_training(single_run, tmp_path / "ddp", tiny_lm_sft.path, "ddp")
    if "algo.reward_weight=0.5" in extra:
        rewards = [m["reward/std"] for m in _metrics_of(single_run)[1:]]
        assert max(rewards) > 0, "the reward's advantage was zero on every step: reward_weight went untested"


def _metrics_of(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
