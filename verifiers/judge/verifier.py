"""`verifier=judge`: a language model grades each completion, against the record's gold `answer` or a rubric.

    env.reward=[{verifier: judge, params: {url: http://127.0.0.1:8000/v1, model: judge}}]
    env.reward=[{verifier: judge, params: {checkpoint: smollm2, mode: hybrid, rule: {verifier: math}}}]

The judge is any OpenAI-compatible server (client.py: `api: chat` posts to /v1/chat/completions, `api: completions`
to /v1/completions). `checkpoint` instead of `url`: `rlvr train` serves that checkpoint with vLLM first, as
`rollout=server` serves the policy (trainer/judge_setup.py), and fills in `url`.

Modes:
* `judge`: every completion is judged. Gold: one request, replied CORRECT or INCORRECT (reward 1 or 0). Rubric
  (`rubric: [{criterion: "...", weight: 2}, ...]`): one request per criterion, replied YES or NO; the reward is the
  weighted share of YES, status `correct` from `correct_at` (default 1.0: every criterion met).
* `hybrid`: the `rule` verifier (default math) scores every completion first; the judge is asked only about the
  rule's negatives (`incorrect`, `unparsable`), and a judge's CORRECT overturns them (reward 1). This is the rule-first
  pattern of TinyV (Xu et al. 2025, "TinyV: Reducing False Negatives in Verification") and xVerify, and of the
  verifiers library's HybridMathRubric: rule positives are never sent to a judge, so a judge cannot take reward away
  from a checkable right answer, and it costs requests only where the rule said no. Each result's
  `details["hybrid"]` says what the rule said and whether the judge overturned it; `counts` keeps the totals and each
  batch logs them (logger `rlvr.verifiers.judge`).

Statuses: a reply that is not exactly a label is `error` (verdict.py), never a score; a request that overran
`timeout` or the batch's `batch_timeout` is `timeout`; a record without the `answer` a gold judge needs is `error`
naming the field. Rewards of `error` and `timeout` are 0 (in hybrid: the rule's reward, which was a negative).

`gate`, `gate_threshold`, `gate_rows`: the audit `rlvr train` runs on this judge before training (gate.py);
`gate: false` turns it off, with a WARNING. They are read by the trainer, not here.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlvr.errors import ConfigError
from rlvr.verifiers.judge.client import JudgeClient, Reply
from rlvr.verifiers.judge.prompt import (EXTRACTS, GOLD_LABELS, GOLD_TEMPLATE, RUBRIC_LABELS, RUBRIC_TEMPLATE,
                                         check_template, question_of, response_span)
from rlvr.verifiers.judge.verdict import VerdictError, parse_verdict
from rlvr.verifiers.registry import build_verifier, register_verifier
from rlvr.verifiers.result import Status, VerifyResult

log = logging.getLogger("rlvr.verifiers.judge")
NEGATIVES = (Status.INCORRECT, Status.UNPARSABLE)  # what a hybrid judge is asked about


def _number(name: str, value: Any, low: float = 0.0, allow_equal: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
            value < low if allow_equal else value <= low):
        raise ConfigError(f"judge verifier: {name!r} must be a number {'>=' if allow_equal else '>'} {low:g}, "
                          f"got {value!r}")
    return float(value)


def _rubric(rubric: Any) -> list[tuple[str, float]] | None:
    if rubric is None:
        return None
    if isinstance(rubric, str) or not isinstance(rubric, Sequence) or not rubric:
        raise ConfigError(f"judge verifier: 'rubric' must be a non-empty list of {{criterion, weight}}, got {rubric!r}")
    criteria = []
    for i, entry in enumerate(rubric):
        if isinstance(entry, str):
            entry = {"criterion": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("criterion"), str) or not entry["criterion"]:
            raise ConfigError(f"judge verifier: rubric entry {i} needs a 'criterion' (text), got {entry!r}")
        unknown = set(entry) - {"criterion", "weight"}
        if unknown:
            raise ConfigError(f"judge verifier: rubric entry {i} has unknown keys {sorted(unknown)}")
        criteria.append((entry["criterion"], _number(f"rubric[{i}].weight", entry.get("weight", 1.0))))
    return criteria


@register_verifier("judge")
class JudgeVerifier:
    """A language model as the reward; see the module docstring."""

    name = "judge"

    def __init__(self, url: str | None = None, checkpoint: str | None = None, model: str = "judge",
                 api: str = "chat", template: str | None = None, rubric: list | None = None,
                 labels: Mapping[str, float] | None = None, extract: str | None = None,
                 max_response_chars: int = 4000, max_tokens: int = 8, temperature: float = 0.0,
                 timeout: float = 60.0, batch_timeout: float = 600.0, concurrency: int = 8,
                 api_key_env: str | None = None, mode: str = "judge", rule: Mapping | None = None,
                 correct_at: float = 1.0, gate: bool = True, gate_threshold: float = 0.2, gate_rows: int = 3,
                 seed: int = 0):
        if url is None:
            raise ConfigError("judge verifier: give 'url' (an OpenAI-compatible base URL, http://HOST:PORT/v1)"
                              + (f"; checkpoint={checkpoint!r} is served only by `rlvr train`, which fills in url"
                                 if checkpoint else " or, under `rlvr train`, 'checkpoint' (a model it serves)"))
        if api not in ("chat", "completions"):
            raise ConfigError(f"judge verifier: 'api' must be chat | completions, got {api!r}")
        if mode not in ("judge", "hybrid"):
            raise ConfigError(f"judge verifier: 'mode' must be judge | hybrid, got {mode!r}")
        self.rubric = _rubric(rubric)
        extract = extract if extract is not None else ("none" if self.rubric else "answer_tag")
        if extract not in EXTRACTS:
            raise ConfigError(f"judge verifier: 'extract' must be {' | '.join(EXTRACTS)}, got {extract!r}")
        if mode == "hybrid" and self.rubric:
            raise ConfigError("judge verifier: mode=hybrid overturns a rule's verdict on a gold answer; "
                              "it takes no 'rubric'")
        self.template = template or (RUBRIC_TEMPLATE if self.rubric else GOLD_TEMPLATE)
        check_template(self.template, ("question", "criterion", "response", "answer") if self.rubric
                       else ("question", "answer", "response"))
        self.labels = dict(labels) if labels else dict(RUBRIC_LABELS if self.rubric else GOLD_LABELS)
        for label, score in self.labels.items():
            _number(f"labels.{label}", score, 0.0, allow_equal=True)
        if not isinstance(max_response_chars, int) or isinstance(max_response_chars, bool) or max_response_chars < 1:
            raise ConfigError(f"judge verifier: 'max_response_chars' must be an int >= 1, got {max_response_chars!r}")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ConfigError(f"judge verifier: 'concurrency' must be an int >= 1, got {concurrency!r}")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ConfigError(f"judge verifier: 'max_tokens' must be an int >= 1, got {max_tokens!r}")
        try:
            self.client = JudgeClient(str(url), str(model), api, max_tokens, _number("temperature", temperature, 0.0,
                                                                                      allow_equal=True),
                                      _number("timeout", timeout), _number("batch_timeout", batch_timeout),
                                      concurrency, api_key_env, int(seed))
        except ValueError as e:
            raise ConfigError(f"judge verifier: {e}") from None
        self.extract, self.max_response_chars, self.mode = extract, max_response_chars, mode
        self.correct_at = _number("correct_at", correct_at, 0.0, allow_equal=True)
        self.gate, self.gate_rows = bool(gate), int(gate_rows)
        self.gate_threshold = _number("gate_threshold", gate_threshold, 0.0, allow_equal=True)
        self.checkpoint = checkpoint
        self.rule = None
        if mode == "hybrid":
            spec = dict(rule or {"verifier": "math"})
            if not isinstance(spec.get("verifier"), str) or set(spec) - {"verifier", "params"}:
                raise ConfigError(f"judge verifier: 'rule' must be {{verifier: NAME, params: {{...}}}}, got {rule!r}")
            self.rule = build_verifier(spec["verifier"], **dict(spec.get("params") or {}))
        self.counts: Counter = Counter()  # hybrid: rule_negatives, judge_asked, overturned; every mode: verdict statuses

    def close(self) -> None:
        close = getattr(self.rule, "close", None)
        if close is not None:
            close()

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        return self.verify_batch([completion], [record])[0]

    def verify_batch(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]], workers: int | None = None,
                     progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
        if len(completions) != len(records):
            raise ValueError(f"judge verifier got {len(completions)} completions for {len(records)} records")
        if self.rule is None:
            results = self._judge(completions, records)
        else:
            results = self._hybrid(completions, records, workers)
        if progress is not None:
            progress(len(results))
        return results

    def _hybrid(self, completions, records, workers) -> list[VerifyResult]:
        from rlvr.verifiers.batch import verify_batch

        ruled = verify_batch(self.rule, list(completions), list(records), workers=workers)
        asked = [i for i, r in enumerate(ruled) if r.status in NEGATIVES]
        judged = dict(zip(asked, self._judge([completions[i] for i in asked], [records[i] for i in asked])))
        results, overturned = [], 0
        for i, rule_result in enumerate(ruled):
            if i not in judged:
                results.append(VerifyResult(rule_result.reward, rule_result.status, {
                    **rule_result.details, "hybrid": {"rule_status": rule_result.status.value, "judge": None,
                                                      "overturned": False}}))
                continue
            verdict = judged[i]
            flip = verdict.status is Status.CORRECT
            overturned += flip
            status = verdict.status if verdict.status in (Status.CORRECT, Status.ERROR, Status.TIMEOUT) \
                else rule_result.status
            results.append(VerifyResult(verdict.reward if flip else rule_result.reward, status, {
                **rule_result.details, "judge": verdict.details,
                "hybrid": {"rule_status": rule_result.status.value, "judge": verdict.status.value,
                           "overturned": flip}}))
        self.counts.update(rule_negatives=len(asked), judge_asked=len(asked), overturned=overturned)
        log.info("judge hybrid: %d of %d completions were rule negatives; the judge overturned %d (run total: %d of %d)",
                 len(asked), len(ruled), overturned, self.counts["overturned"], self.counts["rule_negatives"])
        return results

    def _judge(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]]) -> list[VerifyResult]:
        """Every completion judged: the prompts of all of them in one batch of requests."""
        prompts: list[str] = []
        plans: list[tuple[list[int], dict] | VerifyResult] = []  # per completion: its prompts' indices, or a result
        for completion, record in zip(completions, records):
            plan = self._prompts(completion, record)
            if isinstance(plan, VerifyResult):
                plans.append(plan)
                continue
            texts, details = plan
            plans.append((list(range(len(prompts), len(prompts) + len(texts))), details))
            prompts.extend(texts)
        replies = self.client.ask(prompts) if prompts else []
        results = []
        for plan in plans:
            result = plan if isinstance(plan, VerifyResult) else self._score([(prompts[k], replies[k]) for k in plan[0]],
                                                                              plan[1])
            self.counts[result.status.value] += 1
            results.append(result)
        return results

    def _prompts(self, completion: str, record: Mapping[str, Any]) -> tuple[list[str], dict] | VerifyResult:
        if not isinstance(completion, str):
            return VerifyResult(0.0, Status.ERROR, {"error": f"completion is not text: {type(completion).__name__}"})
        answer = record.get("answer")
        if not self.rubric and (answer is None or isinstance(answer, (dict, list))):
            return VerifyResult(0.0, Status.ERROR, {"error": "judge verifier: the record has no 'answer' (the gold "
                                                             "answer a gold judge compares with); give a rubric"})
        response, source = response_span(completion, self.extract, self.max_response_chars)
        fields = {"question": question_of(record), "response": response, "answer": "" if answer is None else str(answer)}
        if self.rubric:
            texts = [self.template.format(**fields, criterion=criterion) for criterion, _ in self.rubric]
        else:
            texts = [self.template.format(**fields)]
        return texts, {"judged": source, "response": response[:200]}

    def _score(self, asked: list[tuple[str, Reply]], details: dict) -> VerifyResult:
        """The result of one completion's replies: error or timeout when any reply is, else the (weighted) score."""
        verdicts = []
        for prompt, reply in asked:
            if reply.status != "ok":
                status = Status.TIMEOUT if reply.status == "timeout" else Status.ERROR
                return VerifyResult(0.0, status, {**details, "error": reply.error})
            try:
                verdicts.append(parse_verdict(reply.text, self.labels))
            except VerdictError as e:
                return VerifyResult(0.0, Status.ERROR, {**details, "error": str(e)})
            self.client.remember(prompt, reply.text)
        if self.rubric:
            weights = [w for _, w in self.rubric]
            reward = sum(w * score for w, (_, score) in zip(weights, verdicts)) / sum(weights)
            details = {**details, "criteria": [label for label, _ in verdicts]}
        else:
            reward = verdicts[0][1]
            details = {**details, "verdict": verdicts[0][0]}
        status = Status.CORRECT if reward >= self.correct_at else Status.INCORRECT
        return VerifyResult(reward, status, details)
