"""Mutation check: switch each listed behaviour off with a one-line change and require its tests to fail.

A test of an optimisation or a rule that only compares with the plain path passes when the behaviour does nothing
(issue 52). Each entry below names one user-facing behaviour, the line that engages it, a line that switches it off,
and the tests that must then fail. Run by hand before claiming a behaviour (not part of `make test`: pytest does not
collect this file):

    .venv/bin/python tests/mutation_check.py            # every entry
    .venv/bin/python tests/mutation_check.py -k chunk   # entries whose name contains "chunk"

It never edits the working tree (others may be working in it): it extracts the committed HEAD into a temporary
folder (`git archive HEAD`), links the package layout pyproject.toml's `package-dir` maps (rlvr.trainer is
trainer/, ...) under that copy's rlvr/, and runs pytest there with the copy first on PYTHONPATH, so `import rlvr`
reads the copy, not the editable install. It first runs every entry's tests unchanged (they must pass: a broken
copy would make every mutant look caught), then each mutant alone, where every listed test (each parametrization)
must fail. Exit status 1 when a baseline test fails, a
listed line is not found exactly once, or a mutant survives.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # repository path
    original: str  # the whole line, indentation included, found exactly once in the file
    mutant: str  # the line that switches the behaviour off
    tests: tuple[str, ...]  # pytest node ids (or files) that must fail under the mutant


MUTATIONS = (
    Mutation("token budget ignored (train.max_tokens_per_micro_batch, train=fast)", "trainer/algos/update.py",
             "    if max_tokens <= 0:", "    if True:",
             ("tests/trainer/algos/test_token_budget.py::test_a_budgeted_step_runs_the_planned_micro_batches",
              "tests/rlvr/test_train_presets.py::test_fast_gives_the_plain_paths_loss_and_gradients")),
    Mutation("packing ignored (train.pack_sequences)", "trainer/algos/update.py",
             "    return Counts(sequences, tokens, micro_batches, micro_batch_size, plan, pack)",
             "    return Counts(sequences, tokens, micro_batches, micro_batch_size, plan, False)",
             ("tests/trainer/algos/test_packing.py::test_a_packed_step_runs_each_micro_batch_as_one_row",)),
    Mutation("chunked logprobs never taken (train.logprob_chunk_tokens)", "trainer/models/logprobs.py",
             "    if chunk_tokens > 0:", "    if False:",
             ("tests/trainer/models/test_chunked_logprobs.py::test_token_logprobs_chunked_equals_plain",
              "tests/trainer/models/test_chunked_logprobs.py::test_a_step_with_chunked_logprobs_equals_the_plain_step")),
    Mutation("prompt prefilled G times (rollout.hf.prefill_once)", "trainer/rollout/hf.py",
             "        if self.prefill_once and returns > 1 and width > 1:", "        if False:",
             ("tests/trainer/rollout/test_rollout_hf.py::test_one_prefill_per_prompt_samples_what_every_copy_prefilled_does",)),
    Mutation("truncation rule off in the training step (rollout.truncated_reward)", "trainer/experience/rewards.py",
             "        results = no_credit_when_truncated(results, rollout.truncated, cfg.rollout.truncated_reward)",
             "        results = results",
             ("tests/trainer/evaluation/test_truncation.py::test_a_training_step_pays_nothing_for_a_cut_correct_answer[zero-expected0]",)),
    Mutation("truncation rule off in rlvr eval (rollout.truncated_reward)", "trainer/evaluation/evaluate.py",
             "    results = no_credit_when_truncated(scored, rollout.truncated, truncated_reward)",
             "    results = scored",
             ("tests/trainer/evaluation/test_truncation.py::test_rlvr_eval_pays_nothing_for_a_cut_correct_answer[zero-0.5]",)),
    Mutation("pass@1_ci95 a 50% interval", "trainer/evaluation/passk.py",
             "    tail = (1.0 - level) / 2", "    tail = 0.25",
             ("tests/trainer/evaluation/test_passk.py::test_bootstrap_ci_is_the_percentile_interval_derived_by_hand",)),
    # the rules of issue 50's round-4 hostile set that need no sandbox
    Mutation("format reward paid for an empty <answer>", "verifiers/format.py",
             '    if not text[positions[-2] + len("<answer>"): positions[-1]].strip():', "    if False:",
             ("tests/verifiers/test_verifiers_format.py::test_an_empty_answer_is_not_the_format",
              "tests/verifiers/test_verifiers_format.py::test_no_environment_pays_anything_for_an_empty_answer")),
    Mutation("a hedged math answer paid", "verifiers/math/verifier.py",
             "        if hedged:  # candidates offered as alternatives are not paid, even when one of them is right "
             "(hedge.py)", "        if False:",
             ("tests/verifiers/math/test_math_hedge.py::test_hedges_are_not_paid_even_when_a_candidate_is_right"
              "[The answer is B or C.-B]",  # the other rows' last candidate is wrong anyway
              "tests/verifiers/math/test_math_hedge.py::test_hedges_are_not_paid_even_when_a_candidate_is_right"
              "[\\\\boxed{B \\\\text{ or } C}-B]")),
    Mutation("keys chosen to share one hash decoded (the host's time)", "verifiers/code/wire.py",
             "        if hashes[i] == hashes[i - MAX_SAME_HASH]:", "        if False:",
             ("tests/verifiers/code/test_code_wire.py::test_keys_chosen_to_share_one_hash_are_refused_before_anything_is_built",)),
    Mutation("threads=auto blind to other processes (the machine's load)", "trainer/threads.py",
             "    return max(1, TORCH_DEFAULT - others), others", "    return TORCH_DEFAULT, others",
             ("tests/trainer/test_threads.py::test_auto_leaves_the_cores_other_processes_run_on",
              "tests/trainer/test_threads.py::test_before_each_step_the_count_follows_the_load_and_says_so",
              "tests/trainer/test_threads.py::test_beside_a_busy_process_per_core_auto_takes_one_thread")),
    # the sweep of issue 52: every other user-facing switch whose test could pass with it doing nothing
    Mutation("activations never checkpointed (model.gradient_checkpointing)", "trainer/models/model.py",
             "    if model_cfg.gradient_checkpointing:  # on the base model, before peft wraps it", "    if False:",
             ("tests/trainer/models/test_grad_ckpt.py::test_gradient_checkpointing_gives_the_same_gradients",
              "tests/trainer/algos/test_engaged_trainer.py::test_gradient_checkpointing_recomputes_each_layer_in_backward[True-2]")),
    Mutation("zero-variance groups kept (algo.filter_zero_variance_groups)", "trainer/experience/collect.py",
             '    if algo.get("filter_zero_variance_groups", False):  # DAPO eq. 11, on the rewards of stage 4: mixed '
             "outcomes", "    if False:",
             ("tests/trainer/algos/test_dynamic_sampling.py::test_resamples_until_the_batch_is_full",
              "tests/trainer/algos/test_dynamic_sampling.py::test_without_resampling_dropped_groups_are_not_replaced")),
    Mutation("no further rounds sampled (algo.max_resample_rounds)", "trainer/experience/collect.py",
             "                                                           cfg.train.prompts_per_step, "
             "algo.max_resample_rounds,",
             "                                                           cfg.train.prompts_per_step, 0,",
             ("tests/trainer/algos/test_dynamic_sampling.py::test_resamples_until_the_batch_is_full",)),
    Mutation("DAPO's overlong penalty never added (algo.overlong_buffer)", "trainer/experience/collect.py",
             '    if algo.get("overlong_buffer", 0):', "    if False:",
             ("tests/trainer/algos/test_algorithm_steps.py::test_dapo_step_adds_the_overlong_penalty_to_the_rewards",)),
    Mutation("best-vs-worst pairs not length-matched (algo.length_match)", "trainer/algos/pairs.py",
             "    if not length_match:", "    if True:",
             ("tests/trainer/algos/test_pairs.py::test_length_matching_prefers_close_lengths",)),
    Mutation("all-pairs order blind to length (algo.length_match)", "trainer/algos/pairs.py",
             "        length_gap = abs(group[c].length - group[r].length) if length_match else 0",
             "        length_gap = 0",
             ("tests/trainer/algos/test_pairs.py::test_length_matching_prefers_close_lengths",)),
    Mutation("DPO's config never reaches the pairing (algo.length_match)", "trainer/algos/dpo.py",
             "                       min_margin=algo.min_margin, length_match=algo.length_match)",
             "                       min_margin=algo.min_margin, length_match=False)",
             ("tests/trainer/algos/test_engaged_pairs.py::test_dpo_pairs_follow_algo_length_match[True-expected0]",)),
    Mutation("HF engine ignores top-k (rollout.top_k)", "trainer/rollout/hf.py",
             "    if params.top_k:", "    if False:",
             # the random model: the supervised one's top-0.9 mass already lies within its top 20 tokens
             ("tests/trainer/rollout/test_rollout_hf.py::test_logprobs_equal_output_scores_computation[random-0.7-0.9-20]",)),
    Mutation("no sampling seed per prompt (rollout.seed_per_prompt)", "trainer/experience/collect.py",
             "              if cfg.rollout.seed_per_prompt else ctx.sampling)",
             "              if False else ctx.sampling)",
             ("tests/trainer/test_distributed.py::test_each_rank_draws_and_seeds_its_prompts_as_one_process_would",)),
    Mutation("rollouts never asynchronous (rollout.max_staleness)", "trainer/run.py",
             "    if cfg.rollout.max_staleness:  # the producer samples ahead with its own engine "
             "(experience/async_rollouts.py)", "    if False:",
             ("tests/trainer/experience/test_async_rollouts.py::"
              "test_trained_samples_are_at_most_k_versions_old_and_tagged_with_their_weights",)),
    Mutation("no learning-rate warmup (optim.warmup_steps)", "trainer/algos/update.py",
             "        if step < warmup:", "        if False:",
             ("tests/trainer/algos/test_engaged_trainer.py::test_warmup_ramps_the_learning_rate_linearly_then_the_schedule_runs[constant-after0]",
              "tests/trainer/algos/test_engaged_trainer.py::test_warmup_ramps_the_learning_rate_linearly_then_the_schedule_runs[linear-after1]")),
    Mutation("Dr. GRPO's unscaled advantages ignored (algo.scale_advantages_by_std)", "trainer/algos/grpo.py",
             "    advantages = group_advantages(batch.sampled.rewards, scale_by_std=algo.scale_advantages_by_std)"
             ".flatten()  # [R*B*G]",
             "    advantages = group_advantages(batch.sampled.rewards, scale_by_std=True).flatten()  # [R*B*G]",
             ("tests/trainer/algos/test_engaged_trainer.py::test_dr_grpo_trains_on_advantages_not_divided_by_the_groups_std",)),
    Mutation("curriculum never built (curriculum.enabled)", "trainer/curriculum.py",
             "    if not spec.enabled:", "    if True:",
             ("tests/trainer/test_curriculum.py::test_countdown_ladder_levels_draw_train_rows_and_keep_the_test_split",
              "tests/trainer/test_curriculum.py::test_target_share_mixes_target_prompts_into_every_step_below_the_target")),
    Mutation("KV cache sized by the context, not the run's rows (rollout.vllm.kv_cache_bytes=auto)",
             "trainer/rollout/kv_cache.py",
             "        row = max_len if row_tokens is None else min(row_tokens, max_len)", "        row = max_len",
             ("tests/trainer/rollout/test_kv_cache.py::test_auto_sizes_by_the_runs_rows_not_the_context",)),
    Mutation("KV cache not capped at half the free memory (rollout.vllm.kv_cache_bytes=auto)",
             "trainer/rollout/kv_cache.py",
             "        if cap is not None and size > cap:", "        if False:",
             ("tests/trainer/rollout/test_kv_cache.py::test_auto_never_asks_for_more_than_half_the_available_memory",)),
    Mutation("LoRA synced merged, not as the adapter (rollout.vllm.lora_sync=adapter)", "trainer/models/lora.py",
             "    return model if adapter_sync else merged_copy(model)", "    return merged_copy(model)",
             ("tests/trainer/models/test_engaged_lora.py::test_adapter_sync_hands_the_engine_the_adapter_model_not_a_merged_copy",)),
    Mutation("engine/trainer mismatch left uncorrected (rollout.importance_cap)", "trainer/algos/grpo.py",
             "            if importance_cap is not None:", "            if False:",
             ("tests/trainer/algos/test_engaged_trainer.py::test_importance_cap_weights_the_gradient_by_the_capped_ratio",)),
    Mutation("math gold parsed once per completion, not once per group (its cache)", "verifiers/math/verifier.py",
             "@lru_cache(maxsize=8192)", "@lru_cache(maxsize=0)",
             ("tests/verifiers/math/test_engaged_verifiers.py::test_one_gold_is_parsed_once_for_a_group_of_completions",)),
    Mutation("a math worker killed for overrunning scored as an error, not timeout", "verifiers/math/verifier.py",
             '            elif o.status == "timeout":', "            elif False:",
             ("tests/verifiers/math/test_math_verifier.py::test_pathological_inputs_return_and_leave_the_batch_alone",)),
)

PYTEST = ("-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist")


def extract_head(into: Path) -> None:
    """The committed HEAD as files (the working tree and its uncommitted edits are never touched)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True,
                             timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=120)


def link_packages(copy: Path) -> None:
    """Make `import rlvr.X` resolve inside the copy as pyproject.toml's package-dir maps it
    (rlvr.trainer is trainer/)."""
    mapping = tomllib.loads((copy / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in mapping.items():
        if package == "rlvr":
            if folder != "rlvr":
                raise SystemExit(f"package-dir maps rlvr to {folder!r}; this script expects rlvr/")
            continue
        link = copy / "rlvr" / package.removeprefix("rlvr.").replace(".", "/")
        link.symlink_to(copy / folder, target_is_directory=True)


def run_tests(copy: Path, tests: tuple[str, ...], timeout_s: int) -> tuple[int, str]:
    path = os.pathsep.join([str(copy), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path}
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", *PYTEST, *tests], cwd=copy, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout_s} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else ""  # pytest's summary line


def check_import(copy: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    where = subprocess.run([sys.executable, "-c", "import rlvr.trainer.algos.update as m; print(m.__file__)"], cwd=copy,
                           env=env, capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    if not Path(where).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"rlvr imports from {where}, not from the copy {copy}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only the entries whose name contains this")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per pytest run")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.k in m.name]
    if not chosen:
        raise SystemExit(f"no entry's name contains {args.k!r}")
    failures = []
    with tempfile.TemporaryDirectory(prefix="rlvr-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        copy.mkdir()
        extract_head(copy)
        link_packages(copy)
        check_import(copy)
        baseline = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        code, last = run_tests(copy, baseline, args.timeout)
        print(f"baseline ({len(baseline)} tests unchanged): {'pass' if code == 0 else 'FAIL'}  {last}", flush=True)
        if code != 0:
            return 1
        for m in chosen:
            path = copy / m.file
            text = path.read_text()
            lines = text.split("\n")
            if lines.count(m.original) != 1:
                print(f"SKIPPED {m.name}: {m.file} holds the line {lines.count(m.original)} times, not once")
                failures.append(m.name)
                continue
            path.write_text("\n".join(m.mutant if line == m.original else line for line in lines))
            code, last = run_tests(copy, m.tests, args.timeout)
            path.write_text(text)
            # every listed test must fail (pytest's exit 1, none passed); 2-5 (usage, collection, none) prove nothing
            caught = code == 1 and " passed" not in last
            verdict = "caught  " if caught else "SURVIVED"
            print(f"{verdict} {m.name}: {m.file}: {m.mutant.strip()!r}  {last}", flush=True)
            if not caught:
                failures.append(m.name)
    print(f"{len(chosen) - len(failures)} of {len(chosen)} mutants caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
