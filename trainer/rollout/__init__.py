"""Rollout: the engines. The rollout types and the Engine protocol, the engine factory, the hf and vllm engines, engine
servers, weight sync, prompt rendering and the multi-turn agent loop; what a step does with their completions is
trainer/experience/."""
