"""The reward of TRL's quick start (https://huggingface.co/docs/trl/v0.23.0/quickstart), unchanged: TRL's reward
signature (completions and the rows' columns as keywords, one number per completion) is rlvr's python reward's.
It lives in a module of its own because rlvr scores in worker processes, which import it by name."""


# Define a simple reward function (count unique chars as example)
def reward_function(completions, **kwargs):
    return [len(set(completion.lower())) for completion in completions]
