"""Rollout: the rollout types, the Engine protocol, the engine factory, the hf and vllm engines, prompt rendering, sampling."""
