"""TRPO (Schulman et al. 2015) and the natural policy gradient (Kakade 2001) as one readable update.

    sample -> verify -> advantages (REINFORCE baselines) -> g = grad of the surrogate
    -> x = F^-1 g by conjugate gradient, F x by Hessian-vector products of the KL
    -> step sqrt(2 delta / x.F x) * x -> (TRPO only) backtracking line search -> log

The Fisher matrix F is never formed: F v is the Hessian of the mean KL(pi_old || pi_theta) over the
batch's completion tokens at theta = theta_old, applied to v as J^T H J v (kl_fisher_product: a forward-mode
pass and one backward). The KL is the exact one over the vocabulary, so F is positive semi-definite;
`algo.cg_damping` * I is added, as in the paper's code. `algo.fisher_every` = k estimates F on every k-th
completion of the batch (OpenAI baselines' trpo_mpi: every 5th); the gradient and the line search use all.
`reward.screen_mode=drop_group` removes screened groups before the baseline (trainer/experience/collect.py); a
step that drops every group makes no update (trainer/step.py).
`algo=npg` takes the full step sqrt(2 delta / x.F x) x (the quadratic model's KL equals delta);
`algo=trpo` then halves it (`algo.backtrack_ratio`) until the REAL mean KL <= `algo.max_kl` and the
REAL surrogate improves, for at most `algo.line_search_steps` tries, and keeps theta_old if none holds.
The optimizer and `optim.lr` are not used (the step size comes from delta).

Memory cost, per micro-batch of n rows of L tokens with P parameters and vocabulary V:
  * the old distribution pi_old(. | s_t) is stored for the whole batch: N x L x V floats
    (N = 64, L = 512, V = 150k in fp32 is 20 GB; the real KL of the line search and NPG's metric read all of it);
  * each Fisher-vector product holds the forward graph, the forward-mode tangents (one more activation-sized
    copy) and the logits' tangent n x L x V: about 2x the activation memory of an ordinary backward;
  * conjugate gradient holds about 8 parameter-sized fp32 vectors beside the weights (g, x, r, p, F p, the
    F v accumulator and its per-chunk gradients, then theta_old and the step), i.e. about 36 bytes x P with
    the weights (a 7B model: about 250 GB, against 112 GB for GRPO with AdamW; docs/algorithms.md has the
    table), which is why the LLM-scale algorithms (PPO, GRPO) replaced TRPO's trust region by a clipped ratio.
  * time: cg_iters + 1 Fisher-vector products (each a forward-mode pass, a forward and a backward) per step,
    plus one forward per line-search try; forward-mode needs the unfused "math" attention (flash /
    memory-efficient kernels have no forward derivative), so those passes hold the full attention
    matrices (n x heads x L x L).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.func import functional_call, jvp
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from rlvr.trainer.algos.advantages import outcome_advantages
from rlvr.trainer.algos.losses import aggregate
from rlvr.trainer.context import RunContext
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.logprobs import PackedBatch, log_distributions, pick


def conjugate_gradient(matvec, b: Tensor, iters: int = 10, residual_tol: float = 1e-10) -> Tensor:
    """Solve A x = b for symmetric positive-definite A given only x -> A x (Hestenes & Stiefel 1952;
    TRPO appendix C uses it with A = the Fisher matrix, never formed). Starts at x = 0 and stops after
    `iters` iterations or when the squared residual falls below `residual_tol`. `b` is 1-d.
    """
    x = torch.zeros_like(b)  # [P]
    r = b.clone()  # [P] residual b - A x
    p = b.clone()  # [P] search direction
    rr = r @ r  # []
    for _ in range(iters):
        if rr <= residual_tol:
            break
        ap = matvec(p)  # [P]
        alpha = rr / (p @ ap)  # []
        x = x + alpha * p
        r = r - alpha * ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def trpo_update(ctx: RunContext, batch: Batch) -> dict:
    """One TRPO step (algo=trpo) on the kept rows of freshly sampled completions: the natural-gradient step,
    then `algo.line_search_steps` halvings until the real KL and surrogate hold. The optimizer and its schedule
    are not used (trainer/algos/table.py: optimizer=False)."""
    return _natural_gradient_step(ctx, batch, ctx.cfg.algo.line_search_steps)


def npg_update(ctx: RunContext, batch: Batch) -> dict:
    """One natural-gradient step (algo=npg): TRPO's step of KL size `algo.max_kl`, taken without a line search."""
    return _natural_gradient_step(ctx, batch, line_search_steps=0)


def _natural_gradient_step(ctx: RunContext, batch: Batch, line_search_steps: int) -> dict:
    cfg, algo = ctx.cfg, ctx.cfg.algo
    trained = batch.trained
    advantages = outcome_advantages(trained.rewards, algo.baseline).flatten()  # [N]
    with timed(batch.timings, "update"):
        metrics = natural_gradient_update(
            ctx.model, trained.batch, advantages, max_kl=algo.max_kl, cg_iters=algo.cg_iters,
            cg_damping=algo.cg_damping, line_search_steps=line_search_steps,
            backtrack_ratio=algo.backtrack_ratio, fisher_every=algo.fisher_every, aggregation=algo.aggregation,
            micro_batch_size=cfg.train.micro_batch_size, temperature=cfg.rollout.temperature,
            max_tokens=cfg.rollout.max_new_tokens)
    return {**metrics, "zero_adv_frac": (advantages == 0).float().mean().item()}


def natural_gradient_update(model, batch: PackedBatch, advantages, *, max_kl: float, cg_iters: int = 10,
                            cg_damping: float = 0.1, line_search_steps: int = 10, backtrack_ratio: float = 0.5,
                            fisher_every: int = 1, aggregation: str = "token_mean", micro_batch_size: int = 64, temperature: float = 1.0,
                            max_tokens: int | None = None) -> dict:
    """Update `model` in place by one natural-gradient step of KL size `max_kl`; line_search_steps=0
    is NPG (take the step), > 0 is TRPO. F is estimated on every `fisher_every`-th row only (the gradient
    and the line search use them all). Returns metrics: surrogate improvement, KL, accepted step fraction."""
    params = [p for p in model.parameters() if p.requires_grad]
    chunks = _slices(len(batch), micro_batch_size)
    num_tokens = batch.completion_mask.sum()
    counts = dict(max_tokens=max_tokens, num_sequences=len(batch), num_tokens=num_tokens)

    def log_dists(c):  # log pi_theta(. | s_t) on rows c: [n, L-1, V]
        return log_distributions(model, batch.select(c), temperature)

    def sampled(log_dist, c):  # log pi_theta(o_t) of the sampled tokens: [n, L-1]
        return pick(log_dist, batch.input_ids[c, 1:])

    def mean_kl(log_dist, c):  # this chunk's share of mean_t KL(pi_old || pi_theta), exact over the vocabulary
        old = old_log_dists[c]  # [n, L-1, V]
        per_token = (old.exp() * (old - log_dist)).sum(-1)  # [n, L-1]
        return (per_token * batch.completion_mask[c]).sum() / num_tokens  # []

    def surrogate(log_dist, c):  # this chunk's share of the surrogate sum ratio * A (to maximise)
        ratio = torch.exp(sampled(log_dist, c) - old_logprobs[c])  # [n, L-1]
        per_token = ratio * advantages[c].unsqueeze(-1)  # [n, L-1]
        return aggregate(per_token, batch.completion_mask[c], aggregation, **counts)  # []

    with torch.no_grad():
        old_log_dists = torch.cat([log_dists(c) for c in chunks])  # [N, L-1, V]
        old_logprobs = torch.cat([sampled(old_log_dists[c], c) for c in chunks])  # [N, L-1]

    g = torch.zeros(sum(p.numel() for p in params))  # [P]
    for c in chunks:
        g += parameters_to_vector(_grads(surrogate(log_dists(c), c), params))  # the surrogate's gradient

    rows = torch.arange(0, len(batch), fisher_every)  # [N / fisher_every] the rows F is estimated on
    fisher_batch, fisher_old = batch.select(rows), old_log_dists[rows]
    fisher_vector_product = kl_fisher_product(
        model, params, [(fisher_batch.select(c), fisher_old[c]) for c in _slices(len(rows), micro_batch_size)],
        fisher_batch.completion_mask.sum(), temperature, cg_damping)

    x = conjugate_gradient(fisher_vector_product, g, iters=cg_iters)  # [P] ~ F^-1 g
    x_f_x = (x @ fisher_vector_product(x)).clamp(min=1e-12)  # []
    full_step = torch.sqrt(2 * max_kl / x_f_x) * x  # [P]  0.5 step.F.step = max_kl
    theta_old = parameters_to_vector(params).detach().clone()  # [P]

    def evaluate(fraction):  # (real surrogate improvement, real mean KL) at theta_old + fraction * full_step
        vector_to_parameters(theta_old + fraction * full_step, params)
        with torch.no_grad():
            dists = [(log_dists(c), c) for c in chunks]
            return sum(surrogate(d, c) for d, c in dists).item() - surrogate_old, sum(mean_kl(d, c) for d, c in dists).item()

    surrogate_old = aggregate(advantages.unsqueeze(-1).expand_as(old_logprobs), batch.completion_mask, aggregation,
                              **counts).item()  # ratio = 1 at theta_old
    metrics = {"expected_improve": (g @ full_step).item(), "step_norm": full_step.norm().item(),
               "surrogate_old": surrogate_old}
    if line_search_steps == 0:  # NPG
        improve, kl = evaluate(1.0)
        return {**metrics, "improve": improve, "kl": kl, "step_frac": 1.0, "line_search_tries": 0}
    for tries in range(1, line_search_steps + 1):
        fraction = backtrack_ratio ** (tries - 1)
        improve, kl = evaluate(fraction)
        if kl <= max_kl and improve > 0:
            return {**metrics, "improve": improve, "kl": kl, "step_frac": fraction, "line_search_tries": tries}
    vector_to_parameters(theta_old, params)  # no step satisfied both: keep theta_old
    return {**metrics, "improve": 0.0, "kl": 0.0, "step_frac": 0.0, "line_search_tries": line_search_steps}


def kl_fisher_product(model, params, chunks, num_tokens, temperature: float, damping: float):
    """v -> (F + damping I) v, F the Hessian at theta_old of the mean per-token KL(pi_old || pi_theta) over the
    completion tokens of `chunks` (a list of (PackedBatch, old log-distributions [n, L-1, V])).

    At theta = theta_old the KL's Hessian equals its generalised Gauss-Newton matrix J^T H J exactly (the
    term with the logits' second derivatives is weighted by the KL's gradient in the logits, zero there;
    Martens 2014, "New insights and perspectives on the natural gradient method", section 9): J = d logits /
    d theta and H = (diag(p) - p p^T) / T^2, the Hessian of KL(p || softmax(z / T)) in the logits z. So
    F v = J^T (H (J v)): a forward-mode pass for J v (torch.func.jvp) and one backward for J^T u, instead of
    a forward, a backward with create_graph=True and a second backward through it (same values to float
    precision, tests/trainer/algos/test_algorithm_steps.py; about half the time here).
    """
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    assert len(names) == len(params), "params must be the model's trainable parameters, in order"

    def logits_of(batch):  # theta -> logits [n, L-1, V] on `batch`, as a function torch.func can differentiate
        def logits(*theta):
            out = functional_call(model, dict(zip(names, theta)), args=(),
                                  kwargs=dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask))
            return out.logits[:, :-1].float()
        return logits

    def product(v):
        tangents = tuple(t.view_as(p) for t, p in zip(v.split([p.numel() for p in params]), params))
        out = torch.zeros_like(v)  # [P]
        for batch, old in chunks:
            with sdpa_kernel(SDPBackend.MATH):  # the math kernel has forward-mode derivatives
                _, j_v = jvp(logits_of(batch), tuple(p.detach() for p in params), tangents)  # [n, L-1, V]
                p_old = old.exp()  # [n, L-1, V]
                h_j_v = p_old * (j_v - (p_old * j_v).sum(-1, keepdim=True))  # [n, L-1, V] (diag p - p p^T) J v
                weights = batch.completion_mask.unsqueeze(-1) / (num_tokens * temperature ** 2)  # [n, L-1, 1]
                h_j_v = h_j_v * weights  # [n, L-1, V] the mean over tokens, at temperature T
                logits = logits_of(batch)(*params)  # [n, L-1, V]
                out += parameters_to_vector(_grads((logits * h_j_v).sum(), params))  # J^T (H J v)
        return out + damping * v

    return product


def _slices(n: int, size: int) -> list[slice]:
    return [slice(start, start + size) for start in range(0, n, size)]


def _grads(scalar, params, create_graph: bool = False):
    """d scalar / d params, zeros for parameters it does not depend on."""
    grads = torch.autograd.grad(scalar, params, allow_unused=True, create_graph=create_graph)
    return [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
