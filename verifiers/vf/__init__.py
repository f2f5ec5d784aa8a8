"""`verifier=vf`: a `verifiers` (PyPI `verifiers` 0.4.x) task's own reward functions, run in worker processes.

verifier.py (registered as `vf`) scores completions; worker.py holds everything that touches the `verifiers.v1`
API; episode.py steps a multi-turn `verifiers` environment turn by turn for envs/vf/multi_turn.py.
"""
