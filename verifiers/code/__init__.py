"""`verifier=code`: the completion's program run against the record's tests in a sandbox (rlvr.sandboxes).

verifier.py (registered as `code`) builds the runs and reads the verdicts; candidate_program.py and checker_program.py are
the programs that run in the sandbox (harness.py ships them as text and reads their verdicts), whose values cross between processes through wire.py (its source is pasted into them, so it
imports nothing from rlvr); signatures.py names the hacks a run showed; cheats.py lists the hostile completions
that `rlvr sandbox doctor` and the tests try.
"""
