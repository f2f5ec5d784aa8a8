"""One training step, the frame every algorithm runs in; the algorithm itself is only `update(ctx, batch)`.

    batch = collect(ctx, step)         sample -> score -> the reward pipeline -> drop groups (trainer/experience/)
    update(ctx, batch)                 the algorithm's (trainer/algos/), only when some rank has rows to train on
    ctx.scheduler.step()               the learning-rate schedule advances every step
    ctx.engine.sync_weights(model)     the engine samples the next step from the new weights
    batch.report(ctx, step, ...)       the step's metrics and logged samples

One rule for an empty batch: when no rank has a row to train on (reward.screen_mode=drop_group screened every
group, or dynamic sampling found no group with mixed rewards), `update` is not called and the step logs what it
sampled with no update metrics; the schedule still advances and the weights are still synced, as on any step.
The check is over all ranks (`any_rows`), so ranks update together or not at all; a rank left without rows while
another has some still runs `update`, on an empty share, so its collective calls match.

What differs between algorithms is asked of their row (trainer/algos/table.py), never of their name: a row may
make its own batch (`batch_of`: algo=sft's examples, or RFT's samples through the `collect` it is handed, since
no algorithm imports the collection), read it from `data=FILE` (`offline_data`: offline DPO's pairs), and may say
it does not step the optimizer's schedule (`optimizer=False`: TRPO and NPG take their own step, whose size comes
from `algo.max_kl`).
"""

from __future__ import annotations

from rlvr.trainer.algos.table import Algorithm
from rlvr.trainer.context import RunContext
from rlvr.trainer.distributed import any_rows
from rlvr.trainer.experience.collect import collect
from rlvr.trainer.experience.metrics import timed


def train_step(ctx: RunContext, step: int, algorithm: Algorithm) -> tuple[dict, list[dict]]:
    """Step `step` of the run `ctx` holds, with `algorithm`'s `update(ctx, batch) -> metrics`; returns the
    step's (metrics, samples)."""
    if algorithm.batch_of is not None:
        batch = algorithm.batch_of(ctx, step, collect)  # collect: for an algorithm that samples (sft's RFT)
    elif algorithm.offline_data is not None and ctx.cfg.data:
        batch = algorithm.offline_data(ctx, step)
    else:
        batch = collect(ctx, step)
    update_metrics = algorithm.update(ctx, batch) if any_rows(len(batch)) else {}
    if algorithm.optimizer:
        ctx.scheduler.step()
    with timed(batch.timings, "sync"):
        ctx.engine.sync_weights(ctx.model)
    return batch.report(ctx, step, update_metrics)
