"""Math verification: rlvr's `verifier=math` against math-verify on the same labelled pairs.

    python bench/bench_math.py [--synthetic 1000] [--workers N] [--math-verify-repo DIR]

Pairs: the regression table (tests/data/math_cases.py) plus generated GSM8K/MATH-style pairs whose
labels hold by construction (every string distinct, so neither side's parse cache is flattered).
Reported: agreement with the labels; pairs/s on one worker and on all cores; the slowest item;
and pathological inputs (a power tower, a huge expansion, 200 nested fractions, a 50,000-character
sum) under a 3 s limit (time to a verdict or a kill).
math-verify runs with its defaults: `verify(parse(gold), parse(completion))`, gold in `$...$`,
in the main thread (its signal-based timeouts need that); "all cores" uses a multiprocessing.Pool.
It runs before rlvr's in-process run, whose SymPy work would warm SymPy's cache in this process.
With `--math-verify-repo DIR` (a checkout of github.com/huggingface/Math-Verify, never vendored
here) it also reports agreement with the labelled pairs of math-verify's own test suite, read by
bench/math_verify_suite.py: rlvr with its defaults next to math-verify's `verify(parse(gold),
parse(pred))` with its defaults, and lists the pairs where rlvr disagrees. `--suite-only` skips
the rest. Prints the tables and writes bench/results/math.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import multiprocessing
import os
import random
import time

import common

ROOT = common.ROOT


def table_pairs():
    spec = importlib.util.spec_from_file_location("math_cases", ROOT / "tests" / "data" / "math_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(c, str(g), label) for c, g, label, _ in module.CASES]


def synthetic_pairs(n: int, seed: int = 0):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 6
        good = rng.random() < 0.5
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        if kind == 0:
            gold = str(a * 10 + b)
            pred = gold if good else str(a * 10 + b + rng.choice([-1, 1, 10]))
            text = f"She has {a} boxes of {b} pens, and in total {pred} pens.\n#### {pred}"
        elif kind == 1:
            gold = rf"\frac{{{a}}}{{{a + b}}}"
            k = rng.randint(2, 5)
            pred = rf"\frac{{{a * k}}}{{{(a + b) * k}}}" if good else rf"\frac{{{a * k + 1}}}{{{(a + b) * k}}}"
            text = rf"Simplifying the ratio we obtain $\boxed{{{pred}}}$."
        elif kind == 2:
            gold = rf"(x+{a})(x+{b})"
            pred = rf"x^2+{a + b}x+{a * b}" if good else rf"x^2+{a + b}x+{a * b + 1}"
            text = rf"<think>Expand and collect terms.</think> The polynomial is $\boxed{{{pred}}}$."
        elif kind == 3:
            k, m = rng.randint(2, 30), rng.choice([2, 3, 5, 6, 7, 10, 11])
            gold = rf"{k}\sqrt{{{m}}}"
            pred = rf"\sqrt{{{k * k * m}}}" if good else rf"\sqrt{{{k * k * m + 1}}}"
            text = rf"Final Answer: The final answer is ${pred}$. I hope it is correct."
        elif kind == 4:
            gold = rf"({a}, {b})"
            pred = rf"\left({a}, {b}\right)" if good else rf"({b}, {a})" if a != b else rf"({a}, {b + 1})"
            text = rf"The intersection point is $\boxed{{{pred}}}$."
        else:
            gold = rf"\frac{{{a}\pi}}{{{b}}}"
            pred = rf"\frac{{{2 * a}\pi}}{{{2 * b}}}" if good else rf"\frac{{{a}\pi}}{{{b + 1}}}"
            text = rf"So the angle measures $\boxed{{{pred}}}$ radians."
        out.append((text, gold, good))
    return out


def pathological():
    nested = "1"
    for _ in range(200):
        nested = rf"\frac{{1}}{{1+{nested}}}"
    return [(r"\boxed{9^{9^{9^{9}}}}", "5"), (r"\boxed{(x+1)^{100000}-x}", "x"),
            (rf"\boxed{{{nested}}}", "1"), (r"\boxed{" + "1+" * 25000 + "1}", "25001")]


# ---------------------------------------------------------------------------------------------- math-verify

def _mv_gold(gold: str) -> str:
    return gold if any(m in gold for m in ("$", "boxed", "####")) else f"${gold}$"


def mv_one(pair):
    from math_verify import parse, verify

    completion, gold = pair
    try:
        return bool(verify(parse(_mv_gold(gold)), parse(completion)))
    except Exception:
        return False


def run_math_verify(pairs):
    verdicts, worst = [], 0.0
    start = time.perf_counter()
    for completion, gold, _ in pairs:
        t = time.perf_counter()
        verdicts.append(mv_one((completion, gold)))
        worst = max(worst, time.perf_counter() - t)
    return verdicts, time.perf_counter() - start, worst


def run_math_verify_pool(pairs, workers):
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(mv_one, [(c, g) for c, g, _ in pairs[:workers]])  # import in every worker first
        start = time.perf_counter()
        pool.map(mv_one, [(c, g) for c, g, _ in pairs], chunksize=16)
        return time.perf_counter() - start


def mv_suite_one(pair):
    from math_verify import parse, verify

    pred, gold = pair
    try:
        return bool(verify(parse(gold), parse(pred)))
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------- rlvr

def run_rlvr(pairs, workers, timeout=3.0):
    from rlvr.verifiers.math.verifier import MathVerifier

    verifier = MathVerifier(workers=workers, timeout=timeout)
    verifier.verify_batch([pairs[0][0]], [{"answer": "warm-up"}])  # start the workers
    start = time.perf_counter()
    results = verifier.verify_batch([c for c, _, _ in pairs], [{"answer": g} for _, g, _ in pairs])
    seconds = time.perf_counter() - start
    verifier.close()
    worst = max((r.details.get("seconds", 0.0) for r in results), default=0.0)
    return results, seconds, worst


def run_suite(repo: str) -> dict:
    """Agreement of rlvr and math-verify with the labels of math-verify's own test suite."""
    from math_verify_suite import load_suite

    rows, skipped = load_suite(repo)
    pairs = [(pred, gold, label) for _, gold, pred, label in rows]
    ours, _, _ = run_rlvr(pairs, workers=1)
    mv = [mv_suite_one((pred, gold)) for pred, gold, _ in pairs]
    ours_ok = [(r.status.value == "correct") == label for r, (_, _, label) in zip(ours, pairs)]
    mv_ok = [v == label for v, (_, _, label) in zip(mv, pairs)]
    print(f"math-verify's own suite ({repo}): {len(rows)} labelled pairs; left out: {dict(skipped)}")
    print(common.table(["measure", "rlvr math", f"math-verify {importlib.metadata.version('math-verify')}"],
                       [["agreement, math-verify's suite", f"{sum(ours_ok)}/{len(rows)}", f"{sum(mv_ok)}/{len(rows)}"]]))
    print("rlvr disagrees with the label on:")
    for (test, gold, pred, label), ok, r, m in zip(rows, ours_ok, ours, mv_ok):
        if not ok:
            print(f"  {test}: gold {gold[:50]!r}, pred {pred[:50]!r}, label {label}, rlvr {r.status.value}, "
                  f"math-verify {'agrees with the label' if m else 'disagrees too'}")
    print()
    return {"pairs": len(rows), "skipped": dict(skipped), "rlvr": sum(ours_ok), "math_verify": sum(mv_ok)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--math-verify-repo", default=None, help="a checkout of huggingface/Math-Verify")
    parser.add_argument("--suite-only", action="store_true", help="only the math-verify suite agreement")
    args = parser.parse_args()
    load_before = common.load_average()
    if args.suite_only:
        suite = run_suite(args.math_verify_repo) if args.math_verify_repo else None
        common.write_json("math_suite", {"args": vars(args), "suite": suite}, load_before)
        return
    table = table_pairs()
    pairs = table + synthetic_pairs(args.synthetic)
    print(common.machine_line())
    print(f"pairs: {len(table)} table + {args.synthetic} generated = {len(pairs)}\n")

    # SymPy work in this process comes last (rlvr's in-process run): SymPy's expression cache would
    # otherwise be warm for math-verify's timed run on the same strings
    ours1, t_ours1, worst_ours = run_rlvr(pairs, workers=1)
    oursn, t_oursn, _ = run_rlvr(pairs, workers=args.workers)
    mv, t_mv1, worst_mv = run_math_verify(pairs)
    t_mvn = run_math_verify_pool(pairs, args.workers)
    _, t_ours0, _ = run_rlvr(pairs, workers=0)

    def agree(verdicts, subset):
        idx = range(len(table)) if subset == "table" else range(len(table), len(pairs)) if subset == "gen" else range(len(pairs))
        return sum(verdicts[i] == pairs[i][2] for i in idx), len(idx)

    ours_v = [r.status.value == "correct" for r in ours1]
    assert ours_v == [r.status.value == "correct" for r in oursn], "1 worker and N workers disagree"
    n = len(pairs)
    results = {
        "agreement_table": {"rlvr": agree(ours_v, "table"), "math_verify": agree(mv, "table")},
        "agreement_generated": {"rlvr": agree(ours_v, "gen"), "math_verify": agree(mv, "gen")},
        "pairs_per_s_1_worker": {"rlvr": n / t_ours1, "math_verify": n / t_mv1},
        f"pairs_per_s_{args.workers}_workers": {"rlvr": n / t_oursn, "math_verify": n / t_mvn},
        "pairs_per_s_in_process": {"rlvr": n / t_ours0},
        "slowest_item_s": {"rlvr": worst_ours, "math_verify": worst_mv},
        "speedup_1_worker": t_mv1 / t_ours1, f"speedup_{args.workers}_workers": t_mvn / t_oursn,
    }
    mv_version = importlib.metadata.version("math-verify")
    rows = []
    for name, key in (("agreement, table", "agreement_table"), ("agreement, generated", "agreement_generated")):
        (a, k), (b, _) = results[key]["rlvr"], results[key]["math_verify"]
        rows.append([name, f"{a}/{k} ({a / k:.1%})", f"{b}/{k} ({b / k:.1%})"])
    rows += [
        ["pairs/s, 1 worker", f"{n / t_ours1:.0f}", f"{n / t_mv1:.0f}"],
        [f"pairs/s, {args.workers} workers (all cores)", f"{n / t_oursn:.0f}", f"{n / t_mvn:.0f}"],
        ["pairs/s, in-process (`workers=0`, no time limit)", f"{n / t_ours0:.0f}", "-"],
        ["slowest item (s)", f"{worst_ours:.3f}", f"{worst_mv:.3f}"],
    ]
    print(common.table(["measure", "rlvr math", f"math-verify {mv_version}"], rows))
    print(f"\nspeed-up over math-verify: {t_mv1 / t_ours1:.1f}x on 1 worker, {t_mvn / t_oursn:.1f}x on {args.workers}")

    print("\npathological inputs (limit 3 s; time from dispatch to verdict or kill):")
    from rlvr.verifiers.math.verifier import MathVerifier

    verifier = MathVerifier(workers=1, timeout=3.0)
    verifier.verify_batch(["\\boxed{1}"], [{"answer": "x"}])
    patho = []
    for completion, gold in pathological():
        t = time.perf_counter()
        r = verifier.verify_batch([completion], [{"answer": gold}])[0]
        wall = time.perf_counter() - t
        patho.append({"input": completion[:40], "status": r.status.value, "worker_s": r.details.get("seconds", 0),
                      "call_s": wall})
        print(f"  {completion[:32]!r:36} -> {r.status.value:10} worker {r.details.get('seconds', 0):.2f} s, call {wall:.2f} s")
    verifier.close()
    suite = run_suite(args.math_verify_repo) if args.math_verify_repo else None  # after the timings (see above)
    common.write_json("math", {"args": vars(args), "pairs": n, "results": results, "pathological": patho,
                               "suite": suite}, load_before)


if __name__ == "__main__":
    main()
