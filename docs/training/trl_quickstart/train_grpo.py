"""TRL's GRPOTrainer quick start ported line by line to rlvr (docs/training/from-trl.md shows both side by side).

TRL's Quickstart, "Group Relative Policy Optimization" (https://huggingface.co/docs/trl/v0.23.0/quickstart), trains
Qwen/Qwen2.5-0.5B-Instruct on the Hub's trl-lib/tldr prompts with a reward counting unique characters. The port
keeps each line's meaning and changes what needs a network: the model is a local one (the packaged
SmolLM2-135M-Instruct, `model=smollm2`, or any local Hugging Face model given on the command line), and the prompts
are a local JSONL in TL;DR's format read into a `datasets.Dataset`. `ARGS` is a short run in TRL's GRPOConfig field
names (two steps, a checkpoint at the second), which rlvr translates (trainer/trl_keys.py); a `trl.GRPOConfig(**ARGS)`
works the same.

Run it from this folder, where the reward's worker processes find my_rewards.py:

    python train_grpo.py                                                    # model=smollm2 (`make smollm2`)
    python train_grpo.py model=hf model.name_or_path=DIR model.kind=base    # a local Hugging Face model
"""

import sys

from datasets import load_dataset

import rlvr
from my_rewards import reward_function  # a module of its own: rlvr's reward workers import it by name

# GRPOConfig's fields; TRL's defaults train 3 epochs of the dataset, so the quick start names a short run
ARGS = dict(output_dir="grpo-quickstart", max_steps=2, save_steps=2, num_generations=4, per_device_train_batch_size=8,
            max_completion_length=32, learning_rate=1e-5)


def main(overrides: list[str], args=ARGS) -> rlvr.TrainResult:
    dataset = load_dataset("json", data_files="prompts.jsonl", split="train")  # load_dataset("trl-lib/tldr", ...)
    return rlvr.train(                      # trainer = GRPOTrainer(
        *(overrides or ["model=smollm2"]),  #     model="Qwen/Qwen2.5-0.5B-Instruct",  # Start from SFT model
        train_dataset=dataset,              #     train_dataset=dataset,
        reward_funcs=reward_function,       #     reward_funcs=reward_function,
        trl_config=args,                    #     args=GRPOConfig(**ARGS),
        rollout={"truncated_reward": "keep"},  # TRL scores a cut completion as it is (mask_truncated_completions)
    )                                       # ); trainer.train()


if __name__ == "__main__":
    run = main(sys.argv[1:])
    print(f"rlvr: checkpoint {run.checkpoint}")
