"""The training loop asks the algorithm table (trainer/algos/table.py) what a run needs, instead of testing
algorithm names: a row that asks for a reference and a critic gets both, whatever its name."""

import ast
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import OmegaConf

from rlvr.trainer.algos.table import ALGORITHMS

RUN = Path(__file__).resolve().parents[3] / "trainer" / "run.py"


def test_run_py_compares_no_algorithm_name():
    """No `cfg.algo.name == ...` / `in (...)` in the loop: a new algorithm is a row, not a branch."""
    def is_algo_name(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "name" and isinstance(node.value, ast.Attribute)
                and node.value.attr == "algo")

    compares = [node for node in ast.walk(ast.parse(RUN.read_text())) if isinstance(node, ast.Compare)
                and any(is_algo_name(side) for side in [node.left, *node.comparators])]
    assert not compares, [ast.unparse(node) for node in compares]


def test_what_each_row_says_a_run_needs():
    kl_off, kl_on = OmegaConf.create({"beta": 0.0}), OmegaConf.create({"beta": 0.04})
    assert ALGORITHMS["dpo"].needs_reference(kl_off) and ALGORITHMS["dpo"].offline_data
    assert not ALGORITHMS["grpo"].needs_reference(kl_off) and ALGORITHMS["grpo"].needs_reference(kl_on)
    assert [name for name, row in ALGORITHMS.items() if row.build_critic] == ["ppo"]
    assert [name for name, row in ALGORITHMS.items() if row.offline_data] == ["dpo"]


def test_the_loop_builds_what_the_row_asks_for(tiny_lm_sft, compose_train, tmp_path, monkeypatch):
    """GRPO's row changed to want a reference (at beta 0) and a critic: run.train builds both and hands
    them to the step; the update itself is GRPO's, unchanged."""
    import rlvr.trainer.run as run
    import rlvr.trainer.setup as setup

    built, seen = [], {}
    real_reference, grpo_update = setup.build_reference, ALGORITHMS["grpo"].update

    def reference(*args):
        built.append("reference")
        return real_reference(*args)

    def critic(policy, kind):
        built.append(("critic", kind))
        return torch.nn.Linear(1, 1)

    def update(ctx, batch):
        seen.update(reference=ctx.reference, critic=ctx.critic)
        return grpo_update(ctx, batch)

    monkeypatch.setattr(setup, "build_reference", reference)
    monkeypatch.setitem(ALGORITHMS, "grpo", replace(ALGORITHMS["grpo"], update=update, reference="always",
                                                      build_critic=critic))
    cfg = compose_train([f"model.name_or_path={tiny_lm_sft.path}", "rollout=hf", "env.digits=1", "env.ops=[+]",
                         "train.steps=1", "train.prompts_per_step=2", "train.completions_per_prompt=2",
                         "train.micro_batch_size=4", "train.eval_prompts=4", "rollout.max_new_tokens=8",
                         "threads=1", f"output_dir={tmp_path / 'run'}"])
    assert cfg.algo.name == "grpo" and cfg.algo.beta == 0
    run.train(cfg, log=lambda *a, **k: None)
    assert built == ["reference", ("critic", None)]  # grpo's schema has no algo.critic: the row gets None
    assert seen["reference"] is not None and isinstance(seen["critic"], torch.nn.Linear)
