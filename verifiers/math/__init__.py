"""`verifier=math`: the completion's final answer against `record["answer"]`, with SymPy under a time limit.

verifier.py (registered as `math`) runs extract.py -> parse.py -> equal.py in the caller and sends what may run
long to worker.py in `TimeLimitPool` workers; rules.py holds what equal.py and symbolic.py (the SymPy side)
share; hedge.py flags answers that hedge between several (scored `incorrect`).
"""
