"""`rlvr audit`: build every class's completions from each row, score them with the reward, report, gate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from omegaconf import OmegaConf
from tqdm import tqdm

from rlvr.errors import ConfigError
from rlvr.sandboxes.hosts import apply_hosts
from rlvr.trainer.audit import report as reports
from rlvr.trainer.audit.code_probes import CODE_CLASSES, stdio_cases, tests_of
from rlvr.trainer.audit.honest import ANSWER_HONEST, CODE_HONEST
from rlvr.trainer.audit.probes import ANSWER_CLASSES, shape_of
from rlvr.trainer.audit.report import ClassResult
from rlvr.trainer.audit.score import accepted, audited_env, per_test, reward_spec, score
from rlvr.trainer.experience.rewards import check_reward_errors

ALL_CLASSES = list(dict.fromkeys([*ANSWER_CLASSES, *CODE_CLASSES, *ANSWER_HONEST, *CODE_HONEST]))


def probes_of(row: dict, wanted: set[str] | None) -> list[tuple[str, str, str, bool, str, str]]:
    """(class, group, kind, gated, description, completion) for every completion the row gives."""
    out = []
    tests = tests_of(row)
    if tests is not None:
        attack = {name: (group, text, lambda r, b=build: b(r, tests))
                  for name, (group, text, build) in CODE_CLASSES.items()}
        honest, arg = CODE_HONEST, None
    else:
        shape = shape_of(row)
        if shape is None:
            raise ConfigError(f"audit: row {row.get('id')!r} has neither an 'answer' nor 'tests' to build "
                              f"completions from (its keys: {', '.join(row)})")
        attack = {name: (group, text, lambda r, b=build: b(shape))
                  for name, (group, text, build) in ANSWER_CLASSES.items()}
        honest, arg = ANSWER_HONEST, shape
    for name, (group, text, build) in attack.items():
        if wanted is None or name in wanted:
            out += [(name, group, "attack", True, text, c) for c in dict.fromkeys(build(row))]
    for name, (gated, text, build) in honest.items():
        if wanted is None or name in wanted:
            out += [(name, "honest", "honest", gated, text, c) for c in dict.fromkeys(build(row, arg))]
    return out


def test_labels(row: dict) -> list[str]:
    """A short label per test the code verifier runs (the shown tests, then any held back)."""
    labels = []
    for key in ("tests", "hidden_tests"):
        tests = tests_of({"tests": row.get(key)}) if row.get(key) is not None else None
        if tests is None:
            continue
        kind = tests.get("kind")
        if kind == "stdio":
            labels += [f"stdin {stdin[:40]!r} -> {stdout[:40]!r}" for stdin, stdout in stdio_cases(tests)]
        elif kind == "call":
            labels += [f"{tests.get('fn')}(*{json.dumps(c.get('args'))[:40]}) == {json.dumps(c.get('expected'))[:40]}"
                       for c in tests.get("cases") or []]
        else:
            labels.append(f"check({tests.get('entry_point')})")
    return labels


def run_audit(cfg, log: Callable[[str], None] = print) -> int:
    """Audit the reward of `cfg` (conf/audit.yaml); writes audit.json and audit.md; 0 = pass, 1 = a class past its
    threshold."""
    settings = cfg.audit
    wanted = set(settings.classes) if settings.classes else None
    unknown = sorted(((wanted or set()) | set(settings.allow)) - set(ALL_CLASSES))
    if unknown:
        raise ConfigError(f"audit.classes / audit.allow: unknown class {', '.join(unknown)} "
                          f"(classes: {', '.join(ALL_CLASSES)})")
    for key in ("max_accept", "max_false_negative"):
        if not 0 <= settings[key] <= 1:
            raise ConfigError(f"audit.{key}={settings[key]}; it must be a share in [0, 1]")
    if settings.rows < 1:
        raise ConfigError(f"audit.rows={settings.rows}; audit at least 1 row")
    apply_hosts(cfg.sandbox.hosts)
    env = audited_env(cfg.env, cfg.verifier, OmegaConf.to_container(cfg.params, resolve=True) if cfg.params else {})
    try:
        size = env.test_size() if settings.split == "test" else None  # a data file's test rows: all of them at most
        try:
            rows = env.rows(settings.split, min(settings.rows, size or settings.rows), seed=settings.seed)
        except ValueError as error:
            raise ConfigError(f"audit.split={settings.split}, audit.rows={settings.rows}: {error}") from error
        return _audit_rows(cfg, env, rows, wanted, log)
    finally:
        env.shutdown()


def _audit_rows(cfg, env, rows: list[dict], wanted, log) -> int:
    settings = cfg.audit
    classes: dict[str, ClassResult] = {}
    code = {"tests": 0, "gold_fails": [], "trivial_passes": [], "rows_without_results": 0}
    per_row = [probes_of(row, wanted) for row in rows]
    total = sum(map(len, per_row))
    log(f"rlvr audit: {env.name}, reward {' + '.join(c['name'] for c in reward_spec(env))}: {len(rows)} rows, "
        f"{total} completions in {len({p[0] for ps in per_row for p in ps})} classes")
    with tqdm(total=total, desc="audit", unit="completion", dynamic_ncols=True) as bar:  # rate and ETA
        for i, (row, probes) in enumerate(zip(rows, per_row)):
            results = score(env, [row] * len(probes), [p[5] for p in probes])
            check_reward_errors(results, env, f"the audit's completions of row {row.get('id')!r}", log)
            for (name, group, kind, gated, text, completion), result in zip(probes, results):
                entry = classes.setdefault(name, ClassResult(name, group, kind, text, gated))
                entry.add(completion, float(result.reward), result.status.value, accepted(result, settings.correct_at))
            if row.get("tests") is not None:
                _code_tests(i, row, probes, results, code)
            bar.update(len(probes))
    order = {name: k for k, name in enumerate(ALL_CLASSES)}
    ordered = sorted(classes.values(), key=lambda c: (c.kind == "honest", order[c.name]))
    allow = frozenset(settings.allow)
    fails = reports.failures(ordered, settings.max_accept, settings.max_false_negative, allow)
    report = {
        "env": env.name, "reward": reward_spec(env), "rows": len(rows), "split": settings.split,
        "accepted_means": "status correct" if settings.correct_at is None else f"reward >= {settings.correct_at:g}",
        "thresholds": {"max_accept": settings.max_accept, "max_false_negative": settings.max_false_negative},
        "allowed": sorted(allow), "classes": [c.to_dict(allow) for c in ordered],
        "false_negative": {"gated": reports.false_negative_rate(ordered, True),
                           "all": reports.false_negative_rate(ordered, False)},
        "failures": fails, "passed": not fails,
    }
    if code["tests"] or code["rows_without_results"]:
        if code["rows_without_results"]:
            code["note"] = (f"{code['rows_without_results']} code row(s): the reward gives no per-test results "
                            f"(details.tests), so no test could be checked against the reference or the trivial "
                            f"programs.")
        report["code_tests"] = code
    json_path, md_path = reports.write(report, Path(cfg.output_dir))
    log(reports.table(ordered))
    fn = report["false_negative"]
    log(f"false negatives (honest refused): {reports._pct(fn['gated'])} in the reward's format, "
        f"{reports._pct(fn['all'])} of every honest form")
    if code["tests"]:
        log(f"code tests: the reference fails {len(code['gold_fails'])} of {code['tests']}; a trivial program "
            f"passes {len(code['trivial_passes'])}")
    for line in fails:
        log(f"FAIL {line}")
    log(f"rlvr audit: {'FAILED' if fails else 'passed'}; {json_path} and {md_path}")
    return 1 if fails else 0


def _code_tests(i: int, row: dict, probes: list, results: list, code: dict) -> None:
    """Each test against the reference (tests it fails) and the trivial programs (tests they pass)."""
    labels = test_labels(row)
    reference = next((r for p, r in zip(probes, results) if p[0] == "honest_reference"), None)
    gold = per_test(reference) if reference is not None else None
    if gold is None:
        code["rows_without_results"] += 1
        return
    code["tests"] += len(gold)
    label = lambda t: labels[t] if t < len(labels) else f"test {t}"  # noqa: E731
    code["gold_fails"] += [{"row": row.get("id"), "test": t, "label": label(t)} for t, ok in enumerate(gold) if not ok]
    for p, r in zip(probes, results):
        passed = per_test(r) if p[0] == "trivial_programs" else None
        for t, ok in enumerate(passed or []):
            if ok:
                program = p[5].strip("`\n").removeprefix("python\n").splitlines()[-1].strip()
                code["trivial_passes"].append({"row": row.get("id"), "test": t, "program": program, "label": label(t)})
