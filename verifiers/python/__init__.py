"""`verifier=python`: a TRL-style reward function of the user's, called in a time-limited worker process.

verifier.py (registered as `python`) checks and batches the calls; worker.py imports and calls the function.
"""
