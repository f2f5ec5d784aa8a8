"""One step of REINFORCE, PPO, TRPO, NPG, GSPO and DAPO on the tiny model: it runs, logs finite metrics and moves the
parameters; a TRPO step keeps the real KL within delta and improves the surrogate; PPO's state
(value head, adaptive beta) is carried in the context."""

import json
import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from rlvr.trainer.algos.advantages import outcome_advantages
from rlvr.trainer.models.logprobs import pack
from rlvr.trainer.algos.ppo_losses import value_loss
from rlvr.trainer.models.critic import CriticModel, build_critic, logprobs_and_values
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from rlvr.trainer.context import RunContext
from rlvr.trainer.algos.trpo import kl_fisher_product, natural_gradient_update
from rlvr.trainer.models.logprobs import log_distributions
from rlvr.errors import ConfigError
from tests.trainer.test_trainer_step import STEP_OVERRIDES, AlternatingRewardEnv


def _context(cfg, lm):
    model = lm.model()
    critic_module = build_critic(model, cfg.algo.critic) if cfg.algo.name == "ppo" else None
    params = list(model.parameters()) + (list(critic_module.parameters()) if critic_module is not None else [])
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens)
    return RunContext(cfg, AlternatingRewardEnv(digits=1, ops=["+"]), lm.tokenizer, model, None,
                      HFEngine(model, lm.tokenizer), sampling, optimizer, scheduler, critic_module)


@pytest.mark.parametrize("overrides", [
    ["algo=reinforce"], ["algo=reinforce", "algo.baseline=mean"], ["algo=ppo", "algo.mu=2"],
    ["algo=ppo", "algo.objective=penalty"], ["algo=ppo", "algo.critic=model"], ["algo=trpo"], ["algo=npg"],
    ["algo=gspo", "algo.mu=2"], ["algo=dapo"],
], ids=lambda o: "-".join(x.split("=")[1] for x in o))
def test_one_step_runs_and_changes_the_parameters(tiny_lm_sft, compose_train, overrides):
    cfg = compose_train(STEP_OVERRIDES + overrides)
    ctx = _context(cfg, tiny_lm_sft)
    before = {name: p.detach().clone() for name, p in ctx.model.named_parameters()}
    torch.manual_seed(0)
    metrics, samples = train_step(ctx, 1, ALGORITHMS[cfg.algo.name])

    changed = [name for name, p in ctx.model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert len(changed) == len(before), f"unchanged: {sorted(set(before) - set(changed))}"
    assert metrics["reward/std"] > 0 and samples
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()), metrics
    json.dumps(metrics)
    if cfg.algo.name == "ppo":
        head = ctx.critic.head if cfg.algo.critic == "model" else ctx.critic
        assert head.weight.abs().sum() > 0, "the value head must train"
    if cfg.algo.name == "ppo" and cfg.algo.objective == "penalty":
        assert ctx.state["penalty_beta"] in (0.5, 1.0, 2.0) and metrics["penalty_beta"] == ctx.state["penalty_beta"]
    if cfg.algo.name in ("trpo", "npg"):
        assert metrics["kl"] > 0
        assert cfg.algo.name == "npg" or metrics["kl"] <= cfg.algo.max_kl
    if cfg.algo.name == "gspo":  # the second epoch's sequence ratios leave GSPO's 3e-4 / 4e-4 clip range
        assert metrics["clip_frac"] > 0
    assert ("reward/overlong_penalty" in metrics) == (cfg.algo.name == "dapo")


def test_dapo_step_adds_the_overlong_penalty_to_the_rewards(tiny_lm_sft, compose_train):
    cfg = compose_train(STEP_OVERRIDES + ["algo=dapo", "algo.overlong_buffer=12"])
    ctx = _context(cfg, tiny_lm_sft)
    rollouts, generate = [], ctx.engine.generate
    ctx.engine.generate = lambda *args: rollouts.append(generate(*args)) or rollouts[-1]
    torch.manual_seed(0)
    metrics, _ = train_step(ctx, 1, ALGORITHMS["dapo"])
    lengths = torch.tensor([len(ids) for ids in rollouts[0].completion_ids], dtype=torch.float32)
    # L_max = 16, L_cache = 12: a completion of L tokens pays (16 - 12 - L) / 12, clamped to [-1, 0]
    expected = ((4 - lengths) / 12).clamp(-1, 0).mean().item()
    assert expected < 0, "the fixture's completions should be longer than 4 tokens"
    assert metrics["reward/overlong_penalty"] == pytest.approx(expected)
    assert metrics["reward/mean"] == pytest.approx(0.5), "reward/mean stays the verifiers' (alternating 1, 0)"


def test_trpo_step_keeps_kl_within_delta_and_improves_the_surrogate(tiny_lm_sft):
    env = AlternatingRewardEnv(digits=1, ops=["+"])
    tok = tiny_lm_sft.tokenizer
    model = tiny_lm_sft.model()
    torch.manual_seed(0)
    rollout = HFEngine(model, tok).generate(render_prompts(tok, env, env.rows("train", 2, seed=0)),
                                            SamplingParams(n=4, max_new_tokens=16))
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id)
    rewards = torch.tensor([r.reward for r in env.score(rollout.texts, [None] * 8)]).view(2, 4)
    advantages = outcome_advantages(rewards, "rloo").flatten()  # [8]
    delta = 0.005
    metrics = natural_gradient_update(model, batch, advantages, max_kl=delta, cg_iters=10, micro_batch_size=4,
                                      max_tokens=16)
    assert metrics["step_frac"] > 0, metrics
    assert 0 < metrics["kl"] <= delta, metrics
    assert metrics["improve"] > 0, metrics
    # the quadratic model predicted a KL of delta for the full step: the real one is of that order
    assert metrics["kl"] >= 0.1 * delta * metrics["step_frac"] ** 2, metrics


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_fisher_product_is_the_kl_hessian_vector_product(tiny_lm_sft, temperature):
    """kl_fisher_product's J^T H J v equals the Hessian of the mean KL(pi_old || pi_theta) times v, taken the
    plain way (a backward with create_graph, then a second backward), over two chunks of rows."""
    tok = tiny_lm_sft.tokenizer
    model = tiny_lm_sft.model()
    params = [p for p in model.parameters() if p.requires_grad]
    prompt = tok("3+4=", add_special_tokens=False)["input_ids"]
    batch = pack([prompt] * 3, [[5, 6, 7, 8], [9, 10], [11, 12, 13]], tok.pad_token_id)
    num_tokens = batch.completion_mask.sum()
    with torch.no_grad():
        old = log_distributions(model, batch, temperature)  # [3, L-1, V]
    chunks = [(batch.select(slice(0, 2)), old[:2]), (batch.select(slice(2, 3)), old[2:])]
    v = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(0))  # [P]

    with sdpa_kernel(SDPBackend.MATH):  # fused attention kernels have no double backward
        new = log_distributions(model, batch, temperature)  # [3, L-1, V] at theta = theta_old, with a graph
        kl = ((old.exp() * (old - new)).sum(-1) * batch.completion_mask).sum() / num_tokens  # []
        grads = torch.autograd.grad(kl, params, create_graph=True)
    grad_v = torch.cat([g.flatten() for g in grads]) @ v  # []
    expected = torch.cat([h.flatten() for h in torch.autograd.grad(grad_v, params)])  # [P] H v

    got = kl_fisher_product(model, params, chunks, num_tokens, temperature, damping=0.0)(v)  # [P]
    assert expected.norm() > 0
    # float32 sums in another order: equal as vectors to 1e-5 of their norm (a wrong H or J is off by O(1))
    assert (got - expected).norm() / expected.norm() < 1e-5
    damped = kl_fisher_product(model, params, chunks, num_tokens, temperature, damping=0.1)(v)
    assert (damped - (expected + 0.1 * v)).norm() / expected.norm() < 1e-5


@pytest.mark.parametrize("critic", ["head", "model"])
def test_value_loss_reaches_the_policy_only_with_a_shared_head(tiny_lm_sft, critic):
    tok = tiny_lm_sft.tokenizer
    model = tiny_lm_sft.model()
    critic_module = build_critic(model, critic)
    with torch.no_grad():  # a zero head passes no gradient to anything below it, so give it weights
        linear = critic_module.head if critic == "model" else critic_module
        linear.weight.normal_(generator=torch.Generator().manual_seed(0))
    ids = tok("1+2=", add_special_tokens=False)["input_ids"]
    batch = pack([ids, ids], [[5, 6, 7], [8, 9]], tok.pad_token_id)
    logprobs, values, _ = logprobs_and_values(model, critic_module, batch, temperature=1.0)
    loss, _ = value_loss(values, values.detach(), torch.ones_like(values), batch.completion_mask, None)
    loss.backward()

    policy_grads = [p.grad for p in model.parameters()]
    critic_grads = [p.grad for p in critic_module.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in critic_grads[-2:]), "the value head must get a gradient"
    if critic == "head":  # the value loss moves the shared trunk
        assert any(g is not None and g.abs().sum() > 0 for g in policy_grads)
    else:  # the separate critic: its own trunk learns, the policy gets nothing
        assert isinstance(critic_module, CriticModel)
        assert all(g is None for g in policy_grads)
        assert all(g is not None and g.abs().sum() > 0 for g in critic_grads)
        assert not set(map(id, critic_module.parameters())) & set(map(id, model.parameters())), "no shared tensors"
        # the critic's trunk is the base model's: same hidden states as the policy's before any update
        with torch.no_grad():
            ours = critic_module.trunk(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
            policy = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                           output_hidden_states=True).hidden_states[-1]
        torch.testing.assert_close(ours, policy)


def test_ppo_separate_critic_is_checkpointed_and_resumes_bit_for_bit(tiny_lm_sft, compose_train, tmp_path):
    """Run A: 3 steps. Run B: 2 steps, then `resume=` to 3. The critic's trunk and head match bit for bit."""
    from rlvr.trainer.run import train

    common = ["algo=ppo", "algo.critic=model", "algo.mu=2", "model=hf", "model.kind=base",
              f"model.name_or_path={tiny_lm_sft.path}", "rollout=hf", "env.digits=1", "train.prompts_per_step=2", "train.completions_per_prompt=4",
              "train.micro_batch_size=4", "train.eval_prompts=4", "train.eval_every=100", "train.save_every=2",
              "optim.lr=1e-2", "threads=1", "seed=0"]
    quiet = dict(log=lambda *_: None)
    train(compose_train(common + ["train.steps=3", f"output_dir={tmp_path / 'A'}"]), **quiet)
    train(compose_train(common + ["train.steps=2", f"output_dir={tmp_path / 'B'}"]), **quiet)
    wrong = [o.replace("algo.critic=model", "algo.critic=head") for o in common]
    with pytest.raises(ConfigError, match=r"algo.critic: 'model' in the run, 'head' now"):  # before anything is touched
        train(compose_train(wrong + ["train.steps=3", f"resume={tmp_path / 'B'}"]), **quiet)
    train(compose_train(common + ["train.steps=3", f"resume={tmp_path / 'B'}"]), **quiet)

    def critic(run, step):
        return torch.load(tmp_path / run / "checkpoints" / f"step_{step}" / "trainer_state.pt")["critic"]

    a, b, b2 = critic("A", 3), critic("B", 3), critic("B", 2)
    assert any(k.startswith("trunk.") for k in a) and "head.weight" in a, sorted(a)[:5]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], b2[k]) for k in a), "step 3 must have trained the critic further"
