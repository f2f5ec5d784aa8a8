"""The audit's report: per class the mean reward, the share accepted and an example; the false-negative rate of
the honest positives; the code tests the gold fails and the trivial programs pass; and the gate.

Gate: an attack class accepted on more than `max_accept` of its completions, or a gated honest class refused on
more than `max_false_negative` of them, fails the audit (exit status 1), each named in one line.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

EXAMPLE_CHARS = 120


@dataclass
class ClassResult:
    name: str
    group: str
    kind: str  # attack | honest
    description: str
    gated: bool = True
    rewards: list[float] = field(default_factory=list)
    accepted: list[bool] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    example: dict | None = None

    def add(self, text: str, reward: float, status: str, ok: bool) -> None:
        self.rewards.append(reward)
        self.accepted.append(ok)
        self.statuses[status] += 1
        # the example: the first completion that went the wrong way (an accepted attack, a refused honest answer),
        # else the first one
        wrong_way = ok if self.kind == "attack" else not ok
        if self.example is None or (wrong_way and not self.example["wrong_way"]):
            self.example = {"completion": text, "reward": reward, "status": status, "wrong_way": wrong_way}

    @property
    def n(self) -> int:
        return len(self.rewards)

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards) / self.n if self.n else 0.0

    @property
    def accept_rate(self) -> float:
        return sum(self.accepted) / self.n if self.n else 0.0

    def to_dict(self, allow: frozenset[str] = frozenset()) -> dict:
        return {"name": self.name, "group": self.group, "kind": self.kind, "description": self.description,
                "gated": self.gated and self.name not in allow, "n": self.n, "mean_reward": round(self.mean_reward, 4),
                "accepted": round(self.accept_rate, 4), "statuses": dict(self.statuses), "example": self.example}


def failures(classes: list[ClassResult], max_accept: float, max_false_negative: float,
             allow: frozenset[str] = frozenset()) -> list[str]:
    """One line per class past its threshold (attack classes in `allow` never fail)."""
    out = []
    for c in classes:
        if not c.n or c.name in allow:
            continue
        if c.kind == "attack" and c.accept_rate > max_accept:
            out.append(f"attack class {c.name!r} accepted on {c.accept_rate:.0%} of {c.n} completions "
                       f"(audit.max_accept={max_accept:g}); e.g. {_short(c.example['completion'])}")
        if c.kind == "honest" and c.gated and 1 - c.accept_rate > max_false_negative:
            out.append(f"honest class {c.name!r} refused on {1 - c.accept_rate:.0%} of {c.n} completions "
                       f"(audit.max_false_negative={max_false_negative:g}); e.g. {_short(c.example['completion'])}")
    return out


def false_negative_rate(classes: list[ClassResult], gated_only: bool) -> float | None:
    honest = [ok for c in classes if c.kind == "honest" and (c.gated or not gated_only) for ok in c.accepted]
    return 1 - sum(honest) / len(honest) if honest else None


def _short(text: str) -> str:
    flat = " ".join(text.split()) if text.strip() else repr(text)
    return json.dumps(flat[:EXAMPLE_CHARS] + ("..." if len(flat) > EXAMPLE_CHARS else ""), ensure_ascii=False)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def table(classes: list[ClassResult]) -> str:
    """The console table: one line per class."""
    lines = [f"{'class':<24} {'group':<18} {'n':>4} {'mean':>6} {'accepted':>9}  example"]
    for c in classes:
        if not c.n:
            continue
        accepted = f"{c.accept_rate:.0%}" + (" !" if c.kind == "attack" and c.accept_rate else "")
        lines.append(f"{c.name:<24} {c.group:<18} {c.n:>4} {c.mean_reward:>6.2f} {accepted:>9}  "
                     f"{_short(c.example['completion'])[:60]}")
    return "\n".join(lines)


def markdown(report: dict) -> str:
    """audit.md: the setting, the attack and honest tables, the code tests, the verdict."""
    fn = report["false_negative"]
    lines = [f"# rlvr audit: {report['env']}", "",
             f"Reward: {', '.join(_component(c) for c in report['reward'])}; {report['rows']} rows of split "
             f"`{report['split']}`; accepted = {report['accepted_means']}.", "",
             f"False negatives on honest positives: {_pct(fn['gated'])} (in the reward's format, gated), "
             f"{_pct(fn['all'])} (every honest form).", "",
             "| class | group | n | mean reward | accepted | example |", "|---|---|---:|---:|---:|---|"]
    for c in report["classes"]:
        if c["n"]:
            mark = " (not gated)" if not c["gated"] else ""
            example = _short(c["example"]["completion"])[1:-1].replace("|", "\\|").replace("`", "'")
            lines.append(f"| {c['name']}{mark} | {c['group']} | {c['n']} | {c['mean_reward']:.2f} | "
                         f"{c['accepted']:.0%} | `{example}` |")
    code = report.get("code_tests")
    if code:
        lines += ["", "## Code tests", "",
                  f"Tests the reference solution fails: {len(code['gold_fails'])} of {code['tests']}"
                  + "".join(f"\n- row {f['row']} test {f['test']}: {f['label']}" for f in code["gold_fails"]), "",
                  f"Tests a trivial program passes: {len(code['trivial_passes'])} of {code['tests']}"
                  + "".join(f"\n- row {f['row']} test {f['test']} ({f['program']}): {f['label']}"
                            for f in code["trivial_passes"])]
        if code.get("note"):
            lines += ["", code["note"]]
    lines += ["", "## Verdict", ""] + ([f"- FAIL: {line}" for line in report["failures"]] or ["- pass"])
    return "\n".join(lines) + "\n"


def _component(c: dict) -> str:
    return f"`{c['name']}` x {c['weight']:g}" + (f" (gated on `{c['gate']}`)" if c.get("gate") else "")


def write(report: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (out / "audit.md").write_text(markdown(report))
    return out / "audit.json", out / "audit.md"
