"""`verifier=judge`: a language model grades completions through an OpenAI-compatible endpoint (docs/verifiers/judge.md).

verdict.py parses a reply strictly; prompt.py renders the grading prompt; client.py sends requests with timeouts
and a cache; verifier.py is the verifier (judge and hybrid modes); gate.py is the audit a judge passes before it
trains. Serving a checkpoint for the judge is the trainer's (trainer/judge_setup.py): a verifier never starts vLLM.
"""
