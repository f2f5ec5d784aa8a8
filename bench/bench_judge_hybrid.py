"""Hybrid judging on the math regression table: how many of the math rule's negatives a judge overturns, and how
many of those overturns were right.

    python bench/bench_judge_hybrid.py [--checkpoint smollm2] [--url http://HOST:PORT/v1 --model NAME]

Pairs: tests/data/math_cases.py (model outputs with a gold answer and a label written by hand: True when the
completion deserves credit). `verifier=judge` in `mode: hybrid` with `rule: math` and `extract: math` scores all of
them: the rule's positives are kept, its negatives go to the judge. Reported: the rule's negatives, the judge's
statuses on them, the overturns, and how many overturns the hand labels call right (a right overturn is a false
negative of the rule that the judge recovered; a wrong one is reward for a wrong answer). With `--checkpoint` a
`vllm serve` process of it is started here (trainer/rollout/server_process.py) and stopped at the end. Prints the
counts and writes bench/results/judge_hybrid.json with every judged pair.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cases() -> list:
    spec = importlib.util.spec_from_file_location("math_cases", ROOT / "tests" / "data" / "math_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


def measure(url: str, model: str) -> dict:
    from rlvr.verifiers.registry import build_verifier

    table = cases()
    judge = build_verifier("judge", url=url, model=model, mode="hybrid", rule={"verifier": "math"}, extract="math",
                           timeout=300, batch_timeout=3600)
    rows = [{"answer": gold, "messages": [{"role": "user", "content": "Solve the problem."}]} for _, gold, _, _ in table]
    start = time.monotonic()
    try:
        results = judge.verify_batch([completion for completion, *_ in table], rows)
    finally:
        judge.close()
    pairs = []
    for (completion, gold, label, note), result in zip(table, results):
        hybrid = result.details["hybrid"]
        pairs.append({"gold": gold, "label": label, "note": note, "rule": hybrid["rule_status"],
                      "judge": hybrid["judge"], "overturned": hybrid["overturned"],
                      "judged": (result.details.get("judge") or {}).get("response"), "completion": completion[-300:]})
    asked = [p for p in pairs if p["judge"] is not None]
    overturned = [p for p in asked if p["overturned"]]
    return {"pairs_total": len(pairs), "rule_negatives": len(asked),
            "rule_negatives_labelled_right": sum(p["label"] for p in asked),
            "judge_statuses": dict(Counter(p["judge"] for p in asked)), "overturned": len(overturned),
            "overturned_right": sum(p["label"] for p in overturned), "seconds": round(time.monotonic() - start),
            "pairs": pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="smollm2")
    parser.add_argument("--url")
    parser.add_argument("--model", default="judge")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    servers = []
    url = args.url
    if url is None:
        from rlvr.trainer.models.gguf_import import resolve_gguf
        from rlvr.trainer.rollout.server_process import start_servers

        servers = start_servers(resolve_gguf(args.checkpoint), 1, start_timeout_s=900, served_name=args.model,
                                max_model_len=4096, threads=args.threads)
        url = servers[0].url
    try:
        report = measure(url, args.model)
    finally:
        for server in servers:
            server.stop()
    report["judge"] = args.url or args.checkpoint
    out = ROOT / "bench" / "results" / "judge_hybrid.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "pairs"}, indent=1))


if __name__ == "__main__":
    main()
