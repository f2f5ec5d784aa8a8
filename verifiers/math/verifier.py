"""`verifier=math`: does the completion's final answer equal `record["answer"]`?

Pipeline per item: extract (extract.py) -> normalise and parse both sides to answer trees
(parse.py) -> compare (equal.py). Status: correct, incorrect, unparsable (no answer found, or
the model's answer is not valid math), timeout (SymPy overran `timeout`), error (the record's
gold answer is missing or unparsable). `details` holds the extractor, the extracted text and the
normalised forms of both sides; `details["hacks"] == ["hedge"]` marks a hedged answer (hedge.py), which is
scored `incorrect` whatever its candidates (`B or C` for gold B earns nothing). A SymPy failure is `error`.

Where the work runs (the hard time limit lives at a process boundary, never in `signal.alarm`,
which works only on the main thread; verifiers/pool.py):
- In the caller's process, only string work with linear cost (extraction, normalisation,
  parsing of answers up to `FAST_PATH_CHARS`) and exact Fraction arithmetic on numbers of at
  most 200 characters with exponents up to 400. This decides most GSM8K-style and many MATH
  pairs with no SymPy at all, and it cannot blow up.
- Everything that needs SymPy goes to a `TimeLimitPool` of worker processes: a worker that
  overruns `timeout` is killed and replaced and the item gets `timeout`. `__call__` is
  `verify_batch` of one item, so single calls get the same guarantee.
- `workers=0` runs SymPy in the caller's process with no time limit: for profiling only.

Bare answers (a completion that is only the answer, `-5`, `\\frac{10}{9}`, `28 %`, or that ends in
it with no marker, `... which is 1,000.99€`): `lenient=True` (the default) falls back to
`extract_bare` when no marker and no math span is found, as math-verify does. It is the default
because `rlvr verify` and the data-backed envs (gsm8k, math) score text from any model, where a
bare answer is an answer. `lenient=False` is for training envs that demand a marked answer
(a box, `<answer>` tags, a format gate): there an unmarked completion is `unparsable`, so the
policy is never paid for a stray trailing number.

Parsed gold answers are cached (in the caller: the tree; in each worker: the SymPy object), since
GRPO scores G completions against one gold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from rlvr.verifiers.math.equal import PERCENT_MODES, NeedsSympy, equal
from rlvr.verifiers.math.rules import Rules
from rlvr.verifiers.math.extract import DEFAULT_ORDER, EXTRACTORS, extract, extract_gold
from rlvr.verifiers.math.hedge import is_hedge
from rlvr.verifiers.math.parse import Coll, Union, choice_letter, normalize, parse, parse_answers
from rlvr.verifiers.pool import PooledWorkers, default_workers
from rlvr.errors import ConfigError
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

FAST_PATH_CHARS = 500  # longer answers are parsed in a worker too
_CHOICE_GOLD = re.compile(r"\(?([A-J])\)?|\\text(?:bf)?\{\s*\(?([A-J])\)?\s*\}")
_WORKER_MODULE = "rlvr.verifiers.math.worker"


@lru_cache(maxsize=8192)
def _gold(gold: str) -> tuple[str, Any, str | None]:
    """(normalised gold, its tree or None when it is too long for the fast path, choice letter or None)."""
    norm = normalize(extract_gold(gold))
    m = _CHOICE_GOLD.fullmatch(norm)
    letter = next((x for x in m.groups() if x), None) if m else None
    return norm, (parse(norm) if len(norm) <= FAST_PATH_CHARS else None), letter


def _result(status: Status, details: dict) -> VerifyResult:
    return VerifyResult(1.0 if status is Status.CORRECT else 0.0, status, details)


@register_verifier("math")
class MathVerifier(PooledWorkers):
    """Reward 1.0 when the final answer equals `record["answer"]` mathematically, else 0.0.

    Params: `extract` (extractor names in priority order; see extract.EXTRACTORS),
    `last_number` (append the last-number fallback: on for GSM8K-style tasks, off for LaTeX ones),
    `lenient` (append the bare-answer fallback `extract.extract_bare`; see "Bare answers" above),
    `percent` ("either" | "ratio" | "strip"), `rel_tol` (default 0: a decimal is compared at its stated
    precision and exact values exactly, see equal.py; > 0 also accepts a decimal within this
    relative distance of the gold, never an exact value),
    `timeout` (seconds per item, enforced by killing the worker), `workers` (None = all cores;
    0 = in-process without a time limit, for profiling), `memory_limit_mb` (per worker).
    """

    name = "math"
    pool_preload = (_WORKER_MODULE,)

    def __init__(self, extract: Sequence[str] = DEFAULT_ORDER, last_number: bool = False, lenient: bool = True,
                 percent: str = "either",
                 rel_tol: float = 0.0, timeout: float = 3.0, workers: int | None = None,
                 memory_limit_mb: int | None = 4096):
        if isinstance(extract, str) or not all(isinstance(e, str) and e in EXTRACTORS for e in extract):
            raise ConfigError(f"math verifier: 'extract' must be a list of {', '.join(EXTRACTORS)}; got {extract!r}")
        if percent not in PERCENT_MODES:
            raise ConfigError(f"math verifier: 'percent' must be one of {', '.join(PERCENT_MODES)}; got {percent!r}")
        if not (isinstance(rel_tol, (int, float)) and math.isfinite(rel_tol) and 0 <= rel_tol < 1):
            raise ConfigError(f"math verifier: 'rel_tol' must be a number in [0, 1); got {rel_tol!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"math verifier: 'timeout' must be > 0 seconds; got {timeout!r}")
        if workers is not None and (not isinstance(workers, int) or workers < 0):
            raise ConfigError(f"math verifier: 'workers' must be null or an integer >= 0; got {workers!r}")
        order = list(extract)
        if last_number and "last_number" not in order:
            order.append("last_number")
        if not isinstance(lenient, bool):
            raise ConfigError(f"math verifier: 'lenient' must be true or false; got {lenient!r}")
        if lenient and "bare" not in order:
            order.append("bare")
        self.order = tuple(order)
        self.rules = Rules(rel_tol=float(rel_tol), percent=percent)
        self.timeout = float(timeout)
        self.workers = workers
        self.memory_limit_mb = memory_limit_mb

    def verify_batch(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]], workers: int | None = None,
                     progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
        """Results in input order; `progress(k)` is called with the number of newly finished items."""
        self.check_batch(completions, records)
        results: list[VerifyResult | None] = [None] * len(completions)
        slow: list[tuple[int, tuple, dict]] = []
        for i, (completion, record) in enumerate(zip(completions, records)):
            try:
                decided = self._fast(completion, record)
            except Exception as error:  # a bug here must not sink the batch; it is reported, not hidden
                decided = _result(Status.ERROR, {"error": f"{type(error).__name__}: {error}"})
            if isinstance(decided, VerifyResult):
                results[i] = decided
            else:
                args, details = decided
                slow.append((i, args, details))
        if progress is not None and len(slow) < len(results):
            progress(len(results) - len(slow))
        if slow:
            for (i, _, details), (status, reason, seconds) in zip(slow, self._run_slow([a for _, a, _ in slow], workers, progress)):
                details = {**details, "seconds": round(seconds, 4)}
                if reason:
                    details["reason"] = reason
                results[i] = _result(Status(status), details)
        return results  # type: ignore[return-value]

    def _fast(self, completion: str, record: Mapping[str, Any]):
        """A VerifyResult when the caller's process can decide, else (worker args, details so far)."""
        if not isinstance(record, Mapping) or "answer" not in record:
            return _result(Status.ERROR, {"error": "record has no 'answer' field"})
        gold = record["answer"]
        if isinstance(gold, bool) or not isinstance(gold, (str, int, float)) or (isinstance(gold, str) and not gold.strip()):
            return _result(Status.ERROR, {"error": f"record 'answer' must be a non-empty string or a number, got {gold!r}"})
        if not isinstance(completion, str):
            return _result(Status.ERROR, {"error": f"completion must be a string, got {type(completion).__name__}"})
        gold_norm, gold_tree, letter = _gold(str(gold))
        found = extract(completion, self.order)
        gold_many = isinstance(gold_tree, Union) or isinstance(gold_tree, Coll) and len(gold_tree.items) > 1
        hedged = {"hacks": ["hedge"]} if is_hedge(completion, found[0] if found else [], str(gold), gold_many) else {}
        if found is None:  # an empty box is a hedge too: incorrect, like any other
            status = Status.INCORRECT if hedged else Status.UNPARSABLE
            return _result(status, {"gold": gold_norm, "reason": "no answer found", **hedged})
        answers, extractor = found
        pred_norms = tuple(normalize(a) for a in answers)
        details = {"extractor": extractor, "extracted": answers[0] if len(answers) == 1 else answers,
                   "pred": pred_norms[0] if len(pred_norms) == 1 else list(pred_norms), "gold": gold_norm, **hedged}
        if hedged:  # candidates offered as alternatives are not paid, even when one of them is right (hedge.py)
            return _result(Status.INCORRECT, details)
        if letter is not None:  # multiple choice: only the letter counts
            got = [choice_letter(a) for a in answers]
            ok = len(got) == 1 and got[0] == letter
            return _result(Status.CORRECT if ok else Status.INCORRECT, details)
        if gold_tree is not None and all(len(p) <= FAST_PATH_CHARS for p in pred_norms):
            try:
                ok = equal(gold_tree, parse_answers(pred_norms), replace(self.rules, allow_sympy=False))
                return _result(Status.CORRECT if ok else Status.INCORRECT, details)
            except (NeedsSympy, RecursionError):
                pass
        return (gold_norm, pred_norms, self.rules), details

    def _run_slow(self, args: list[tuple], workers: int | None, progress) -> list[tuple[str, str, float]]:
        workers = self.workers if workers is None else workers
        if workers == 0:
            from rlvr.verifiers.math.worker import check

            out = []
            for a in args:
                out.append((*check(*a), 0.0))
                if progress is not None:
                    progress(1)
            return out
        pool = self.worker_pool(default_workers() if workers is None else workers)
        outcomes = pool.map(_WORKER_MODULE + ":check", [tuple(a) for a in args], self.timeout, progress)
        out = []
        for o in outcomes:
            if o.status == "ok":
                out.append((*o.value, o.seconds))
            elif o.status == "timeout":
                out.append(("timeout", f"no result within {self.timeout:g} s; worker killed", o.seconds))
            else:
                out.append(("error", f"worker failed: {o.error}", o.seconds))
        return out
