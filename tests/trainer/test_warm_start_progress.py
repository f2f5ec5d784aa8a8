"""The tiny model's warm start shows progress with an ETA, and gives up with advice when its target is out of reach."""

from rlvr.trainer.warm_start import give_up_reason, warm_start


def test_a_model_that_has_not_started_gets_half_the_budget():
    flat = lambda last, value: [{"step": s, "val_accuracy": value} for s in range(25, last + 1, 25)]  # noqa: E731
    assert give_up_reason(flat(1500, 0.07), 3000, 25, low=0.3)
    assert not give_up_reason(flat(1475, 0.0), 3000, 25, low=0.3)  # too early to tell: arithmetic jumps late


def test_a_target_out_of_reach_stops_early_with_advice_and_each_check_shows_progress(tiny_lm, arith_env):
    lines = []
    report = warm_start(tiny_lm.model(), tiny_lm.tokenizer, arith_env, target_accuracy=[1.0, 1.0], max_steps=6,
                        batch_size=4, lr=1e-6, eval_every=1, eval_rows=4, max_new_tokens=4, seed=0, log=lines.append)
    assert report["out_of_reach"] and report["steps"] == 3, report  # half of 6 steps at 0% of a 100% target
    assert lines[0].startswith("warm start: step 1/6 ") and "left" in lines[0], lines[0]
    advice = lines[-1]
    assert "stopped at step 3 of 6" in advice and "model.name_or_path" in advice
    assert "model.warm_start.target_accuracy" in advice and "model.warm_start.max_steps" in advice
