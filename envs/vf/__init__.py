"""`env=vf:NAME`: an installed `verifiers` taskset package (PyPI `verifiers` 0.4.x) as an rlvr environment.

env.py (registered as `vf`) is the single-turn environment and the factory that picks single- or multi-turn;
multi_turn.py plays a package that exports a verifiers `Env`; tasks.py is what the two share (tasks loaded, split,
rows); catalog.py lists the tasksets `rlvr envs` shows. Scoring runs in verifiers/vf/, never here.
"""
