"""Scoring many completions at once, and `rlvr verify`: a JSONL file of records in, scored JSONL out.

`verify_batch` uses a verifier's own `verify_batch` (the math and code verifiers have one, with
worker pools and time limits) and otherwise loops over `verifier(completion, record)`.

`verify_file` implements the record format of docs/verify.md. Records may mix verifiers: they are grouped
by verifier and each group goes through one batch call, in chunks of `CHUNK` records, so a
10,000-record file streams. Output order equals input order. Output is written as it goes (a
chunk at a time, flushed) for every record up to the first one still being scored, so a killed
run keeps everything already scored; re-running overwrites the output. Writing never fails on content:
each line is UTF-8 JSON, non-ASCII text as itself, or escaped when the record holds text UTF-8 cannot
carry (a lone surrogate, which JSON's \\udXXX escape keeps exactly); a record whose details JSON cannot
write (an int past 4,300 digits) keeps its fields with a note in place of the details. Every line is strict JSON
(RFC 8259, which has no NaN or Infinity): a reward that is not a finite number makes the record an `error` whose
message names the value, and a non-finite float anywhere else (a returned value in details, an input field: Python's
json reads a bare NaN) is written as the string "NaN", "Infinity" or "-Infinity". A malformed
record (bad JSON, which is echoed as {"input": LINE, ...}; not an object, no "completion", no verifier,
an unknown verifier, no "answer" or "tests") gets `"status": "error"` and a message naming its line
number and field, and the run goes on.
A problem of the command itself (`params` a verifier does not take, an unknown `verifier=`) stops the run at start,
before the output is opened.
The exit code of `rlvr verify` is the number of records with status "error", capped at 255.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from rlvr.errors import ConfigError, UnknownNameError
from rlvr.sandboxes.hosts import SandboxConfig
from rlvr.verifiers.registry import build_verifier
from rlvr.verifiers.result import Status, VerifyResult

CHUNK = 1024  # records per batch call: bounds memory and the data a kill can lose


@dataclass
class VerifyConfig:
    """Schema of `conf/verify.yaml` (a typo in a key fails at start)."""

    input: Optional[str] = None
    """The JSONL file of records to score (required)."""
    output: Optional[str] = None
    """Where the scored records go, in input order (required)."""
    verifier: Optional[str] = None
    """The verifier for every record; null: each record's "verifier" field."""
    workers: Optional[int] = None
    """Worker processes; null: all cores."""
    params: Any = field(default_factory=dict)
    """Keyword arguments for the verifier: +params.KEY=VALUE."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # Docker engines for code (rlvr.sandboxes.hosts)


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="verify_schema", node=VerifyConfig)


def verify_batch(verifier: Any, completions: Sequence[str], records: Sequence[Mapping[str, Any]],
                 workers: int | None = None, progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
    """Results in input order, through `verifier.verify_batch` when it has one."""
    if hasattr(verifier, "verify_batch"):
        return verifier.verify_batch(completions, records, workers=workers, progress=progress)
    results = []
    for completion, record in zip(completions, records):
        results.append(verifier(completion, record))
        if progress is not None:
            progress(1)
    return results


def _with_line(scored: dict[str, Any], line: int) -> dict[str, Any]:
    """A verifier's error about a record ("record has no 'answer' field") names the record's line."""
    details = scored.get("details")
    if scored["status"] == Status.ERROR.value and isinstance(details, dict) and isinstance(details.get("error"), str) \
            and not details["error"].startswith("line "):
        scored = {**scored, "details": {**details, "error": f"line {line}: {details['error']}"}}
    return scored


def jsonl_line(item: Mapping[str, Any]) -> str:
    """`item` as one line of strict UTF-8 JSON, whatever text or numbers it holds (see the module docstring)."""
    note = {"error": "this record's details could not be written as JSON"}
    for form in (item, {**item, "details": note}, {k: item[k] for k in ("reward", "status") if k in item}):
        try:
            form = _finite(form)
            text = json.dumps(form, ensure_ascii=False, allow_nan=False)
        except (ValueError, TypeError, RecursionError):  # an int past 4,300 digits, an object JSON has no form for
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: JSON's escapes carry it exactly
            text = json.dumps(form, allow_nan=False)
        return text + "\n"
    return json.dumps({"status": "error", "details": note}) + "\n"


def _non_finite_name(x: float) -> str:
    return "NaN" if math.isnan(x) else "Infinity" if x > 0 else "-Infinity"


def _finite(value: Any) -> Any:
    """`value` with each non-finite float (a value or a key) written as the string NaN, Infinity or -Infinity."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite_name(value)
    if isinstance(value, dict):
        return {_finite(k) if isinstance(k, float) else k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def scored_record(record: Mapping[str, Any], result: VerifyResult, line: int) -> dict[str, Any]:
    """The output record: the input's fields, then the result's; a reward that is not a finite number (which no
    trainer can use and strict JSON cannot write) is the record's `error`, the verifier's own verdict kept beside."""
    scored = result.to_dict()
    if not math.isfinite(scored["reward"]):
        scored = _error(f"the verifier gave a reward of {_non_finite_name(scored['reward'])}, not a finite number "
                        f"(its status: {scored['status']})")
        scored["details"]["verifier_details"] = result.details
    return {**record, **_with_line(scored, line)}


def _json_problem(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at column {error.colno}"
    return f"{type(error).__name__}: {error}"[:200]


def _error(message: str) -> dict[str, Any]:
    return {"reward": 0.0, "status": Status.ERROR.value, "details": {"error": message}}


def verify_file(input_path: str, output_path: str, verifier_name: str | None = None, workers: int | None = None,
                verifier_params: Mapping[str, Any] | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Score every record of `input_path` into `output_path`; returns the summary that is printed."""
    from tqdm import tqdm

    params = dict(verifier_params or {})
    start = time.perf_counter()
    with open(input_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    records: list[Any] = []
    outputs: list[dict[str, Any] | None] = [None] * len(lines)
    groups: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        where = f"line {i + 1}"
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as error:  # JSONDecodeError, an int past 4,300 digits, deep nesting
            records.append(None)
            outputs[i] = {"input": line, **_error(f"{where}: not valid JSON ({_json_problem(error)})")}
            continue
        records.append(record)
        if not isinstance(record, dict):
            outputs[i] = {"input": record, **_error(f"{where}: a record must be a JSON object")}
            continue
        name = verifier_name or record.get("verifier")
        if not isinstance(record.get("completion"), str):
            outputs[i] = {**record, **_error(f"{where}: field 'completion' is missing or not a string")}
        elif not isinstance(name, str) or not name:
            outputs[i] = {**record, **_error(f"{where}: field 'verifier' is missing (or pass verifier=NAME)")}
        else:
            groups.setdefault(name, []).append(i)

    verifiers: dict[str, Any] = {}
    for name, indices in list(groups.items()):
        try:
            verifiers[name] = build_verifier(name, **params)
        except UnknownNameError as error:  # a record's "verifier" field names no verifier: that record's error
            if verifier_name:
                raise ConfigError(f"verifier={verifier_name}: {error}") from None
            for i in indices:
                outputs[i] = {**records[i], **_error(f"line {i + 1}: field 'verifier': {error}")}
            del groups[name]
        except (ConfigError, TypeError) as error:  # params= is the command's, not a record's: stop before scoring
            raise ConfigError(f"params={params}: {error}; nothing was scored and {output_path} was not "
                              f"written") from None

    counts: Counter[str] = Counter(o["status"] for o in outputs if o is not None)
    written = 0
    with open(output_path, "w", encoding="utf-8") as out, \
            tqdm(total=len(lines), desc="verify", unit="rec", disable=not show_progress, file=sys.stderr) as bar:
        bar.update(sum(o is not None for o in outputs))

        def flush() -> None:  # everything scored so far, in input order
            nonlocal written
            while written < len(outputs) and outputs[written] is not None:
                out.write(jsonl_line(outputs[written]))
                written += 1
            out.flush()

        flush()
        for name, indices in groups.items():
            verifier = verifiers[name]
            for lo in range(0, len(indices), CHUNK):
                chunk = indices[lo: lo + CHUNK]
                try:
                    results = verify_batch(verifier, [records[i]["completion"] for i in chunk],
                                           [records[i] for i in chunk], workers=workers, progress=bar.update)
                except Exception as error:  # a verifier bug: report it per record, keep going
                    results = [VerifyResult(0.0, Status.ERROR, {"error": f"verifier {name!r} failed: "
                                                                         f"{type(error).__name__}: {error}"})
                               for _ in chunk]
                    bar.update(len(chunk))
                for i, result in zip(chunk, results):
                    outputs[i] = scored_record(records[i], result, i + 1)
                    counts[outputs[i]["status"]] += 1
                flush()
        for v in verifiers.values():
            if hasattr(v, "close"):
                v.close()
    seconds = time.perf_counter() - start
    return {
        "records": len(lines),
        "counts": dict(sorted(counts.items())),
        "errors": counts.get(Status.ERROR.value, 0),
        "seconds": round(seconds, 3),
        "records_per_s": round(len(lines) / seconds, 1) if seconds > 0 else None,
        "output": str(output_path),
    }


def format_summary(summary: Mapping[str, Any]) -> str:
    counts = ", ".join(f"{k}: {v}" for k, v in summary["counts"].items()) or "none"
    return (f"verified {summary['records']} records in {summary['seconds']:.1f} s "
            f"({summary['records_per_s']} records/s) -> {summary['output']}\n  {counts}")


def exit_code(summary: Mapping[str, Any]) -> int:
    """The number of records with status "error", capped at 255 (0 when all were scored)."""
    return min(int(summary["errors"]), 255)
