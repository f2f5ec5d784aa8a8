"""`verifier=code`: the completion's program run against the record's tests in a sandbox (rlvr.sandboxes).

verifier.py (registered as `code`) builds the runs and reads the verdicts; harness.py holds the programs that run
in the sandbox, whose values cross between processes through wire.py (its source is pasted into them, so it
imports nothing from rlvr); signatures.py names the hacks a run showed; cheats.py lists the hostile completions
that `rlvr sandbox doctor` and the tests try.
"""
