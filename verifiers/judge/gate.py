"""The audit a judge passes before it trains: master keys and prompt injections, scored as training scores them.

A language-model judge pays for text that is not an answer: Zhao et al. 2025 ("One Token to Fool LLM-as-a-Judge")
report judges accepting a lone ":" or "Thought process:" as correct for up to 80-90% of answers on some benchmarks,
and a policy trained against such a judge finds those strings. So `rlvr train` with a judge first builds, from a
few training rows, completions in attack classes, scores them through the environment's own reward (the path
training pays through), and stops with the table when the judge accepts any attack class for more than
`gate_threshold` of its completions. `gate: false` in the judge's params skips it, with a WARNING on the console.

This module scores and tabulates; the classes are passed in. `rlvr train` passes `rlvr audit`'s own (the master
keys, bare and in the answer format, the judge injections, hedges: trainer/audit/probes.py, chosen in
trainer/judge_setup.py), so the gate and the audit test a judge with the same completions. The honest class (the
gold in the answer format) is reported beside them: a judge that refuses everything passes the attacks, so the
table shows both, though only the attacks stop a run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status

HONEST = "honest"  # reported, not gated


@dataclass
class ClassRow:
    name: str
    accepted: int
    total: int
    example: str

    @property
    def share(self) -> float:
        return self.accepted / self.total if self.total else 0.0


@dataclass
class GateReport:
    component: str
    rows: list[ClassRow]
    threshold: float
    statuses: dict[str, int]

    @property
    def failed(self) -> list[ClassRow]:
        return [r for r in self.rows if r.name != HONEST and r.share > self.threshold]

    def table(self) -> str:
        lines = [f"judge gate for reward component {self.component!r} (stops above {self.threshold:.0%} per class):",
                 f"  {'class':<22} {'accepted':>9} {'share':>6}  example", ]
        for r in self.rows:
            mark = "  <- above the threshold" if r in self.failed else ""
            lines.append(f"  {r.name:<22} {r.accepted:>4}/{r.total:<4} {r.share:>6.0%}  {r.example[:40]!r}{mark}")
        lines.append("  verdict statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())))
        return "\n".join(lines)


Classes = Mapping[str, Callable[[Mapping[str, Any]], list[str]]]  # class name -> completions built from a row


def gate_completions(rows: Sequence[Mapping[str, Any]], classes: Classes,
                     honest: Callable[[Mapping[str, Any]], list[str]]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(class, completion, row) for every class's completions of every row, then the honest ones."""
    items = []
    for row in rows:
        for name, build in {**classes, HONEST: honest}.items():
            items.extend((name, text, row) for text in build(row))
    return items


def run_gate(score: Callable[[list[str], list], list], component: str, rows: Sequence[Mapping[str, Any]],
             threshold: float, classes: Classes, honest: Callable[[Mapping[str, Any]], list[str]]) -> GateReport:
    """Score the gate's completions with `score` (the environment's reward) and read `component`'s verdicts.

    `accepted` counts the component's status `correct`; an `error` or `timeout` verdict is not accepted (and is
    counted in `statuses`, so a judge that only errs is visible rather than passing quietly)."""
    items = gate_completions(rows, classes, honest)
    if not items:
        raise ConfigError(f"judge gate: none of the {len(rows)} rows gave an attack (the classes need a gold 'answer'); "
                          f"set gate: false in the judge's params to train without the gate (not advised)")
    results = score([text for _, text, _ in items], [row for _, _, row in items])
    by_class: dict[str, ClassRow] = {}
    statuses: dict[str, int] = {}
    for (name, text, _), result in zip(items, results):
        status = result.details.get("components", {}).get(component, {}).get("status", result.status.value)
        statuses[status] = statuses.get(status, 0) + 1
        row = by_class.setdefault(name, ClassRow(name, 0, 0, text))
        row.total += 1
        if status == Status.CORRECT.value:
            if not row.accepted:  # the example shown is an accepted one where there is one
                row.example = text
            row.accepted += 1
    return GateReport(component, list(by_class.values()), threshold, statuses)
