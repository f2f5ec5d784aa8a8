"""Sandbox throughput: trivial executions/s cold vs warm vs local, and HumanEval judged end to end.

    python bench/bench_sandbox.py [--runs 200] [--workers 2] [--skip-humaneval]

Rows (each a throughput on this machine, all measured in the same run):
- `docker run` (SDK `containers.run(..., remove=True)`, no hardening): the plain cold baseline.
- cold sandbox: a fresh hardened container per execution (DockerSandbox(warm=False)).
- warm pool: DockerSandbox with `--workers` containers, reused.
- local backend: bubblewrap + rlimits (+ a cgroup per run as root), one supervisor per execution.
- HumanEval: the 164 canonical solutions (must all pass) and 164 broken ones (body replaced by
  `return None`; must all fail) written to a JSONL file and scored by a `rlvr verify` subprocess
  (`workers=--workers`), timed end to end: interpreter and sandbox start-up included, as a user
  would run it; `rlvr verify`'s own summary (records/s once started) is printed beside it.
Prints the tables and writes bench/results/sandbox.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import common

TRIVIAL = "print(1)\n"


def rate(fn, n: int, workers: int) -> tuple[float, float]:
    """(executions/s, seconds) for n calls of fn spread over `workers` threads; each must succeed."""
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda _: fn(), range(n)))
    seconds = time.perf_counter() - start
    assert all(results), "an execution failed"
    return n / seconds, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200, help="executions for the warm and local rows")
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--skip-humaneval", action="store_true")
    args = parser.parse_args()
    load_before = common.load_average()

    from rlvr.sandboxes.docker_backend import DockerSandbox, docker_client
    from rlvr.sandboxes.image import image_tag
    from rlvr.sandboxes.local_backend import LocalSandbox

    client = docker_client()
    image = image_tag()
    rows = []

    def plain_docker_run() -> bool:
        out = client.containers.run(image, ["python3", "-c", TRIVIAL], remove=True, network_mode="none")
        return out.strip() == b"1"

    rows.append(("`docker run` (plain, cold)", *rate(plain_docker_run, args.cold_runs, 1), 1))
    cold = DockerSandbox(pool_size=args.workers, warm=False)
    rows.append(("cold sandbox (fresh hardened container per run)",
                 *rate(lambda: cold.run(TRIVIAL).ok, args.cold_runs, args.workers), args.workers))
    cold.close()
    warm = DockerSandbox(pool_size=args.workers)
    warm.warmup()
    rate(lambda: warm.run(TRIVIAL).ok, 2 * args.workers, args.workers)  # first use of each container
    rows.append(("warm pool", *rate(lambda: warm.run(TRIVIAL).ok, args.runs, args.workers), args.workers))
    warm.close()
    local = LocalSandbox(workers=args.workers)
    rows.append(("local backend", *rate(lambda: local.run(TRIVIAL).ok, args.runs // 2, args.workers), args.workers))

    print(common.machine_line())
    print(f"docker {client.version().get('Version')}; image {image}\n")
    runs = {"`docker run` (plain, cold)": args.cold_runs, "cold sandbox (fresh hardened container per run)": args.cold_runs,
            "warm pool": args.runs, "local backend": args.runs // 2}
    print(common.table(["trivial program (`print(1)`)", "executions/s", "runs", "seconds", "concurrency"],
                       [[name, f"{per_s:.1f}", runs[name], f"{seconds:.1f}", workers]
                        for name, per_s, seconds, workers in rows]))
    warm_rate = rows[2][1]
    print(f"\nwarm pool / plain docker run: {warm_rate / rows[0][1]:.1f}x; "
          f"warm pool / cold sandbox: {warm_rate / rows[1][1]:.1f}x")
    humaneval_result = None if args.skip_humaneval else humaneval(args.workers)
    common.write_json("sandbox", {
        "args": vars(args), "docker": client.version().get("Version"), "image": image,
        "trivial": [{"row": name, "executions_per_s": per_s, "runs": runs[name], "seconds": seconds,
                     "concurrency": workers} for name, per_s, seconds, workers in rows],
        "warm_over_docker_run": warm_rate / rows[0][1], "warm_over_cold": warm_rate / rows[1][1],
        "humaneval": humaneval_result,
    }, load_before)


def humaneval(workers: int) -> dict:
    """The 164 canonical and 164 broken HumanEval solutions through a `rlvr verify` subprocess."""
    from rlvr.envs import load_env

    rows = load_env("humaneval").rows("test", 164)
    broken = [f"```python\n{r['tests']['prefix']}    return None\n```" for r in rows]
    records = [{"id": f"{kind}/{r['id']}", "verifier": "code", "completion": completion,
                "tests": r["tests"]}
               for kind, completions in (("canonical", [r["reference"] for r in rows]), ("broken", broken))
               for r, completion in zip(rows, completions)]
    with tempfile.TemporaryDirectory() as tmp:
        source, scored = Path(tmp) / "humaneval.jsonl", Path(tmp) / "scored.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in records))
        child = common.run_child([sys.executable, "-m", "rlvr", "verify", f"input={source}", f"output={scored}",
                                  f"workers={workers}"])
        if child["returncode"] != 0 or not scored.exists():
            raise RuntimeError(f"rlvr verify failed: {common.last_line(child)}")
        out = [json.loads(line) for line in scored.read_text().splitlines()]
    passed = sum(r["status"] == "correct" for r in out[:164])
    failed = sum(r["status"] != "correct" and r["reward"] == 0 for r in out[164:])
    summary = next((line.strip() for line in child["stdout"].splitlines() if line.startswith("verified")), "")
    seconds = child["seconds"]
    print(f"\nHumanEval through `rlvr verify workers={workers}` (subprocess, start-up included): canonical "
          f"{passed}/164 pass, broken {failed}/164 fail, {len(out)} records in {seconds:.1f} s "
          f"({len(out) / seconds:.1f} records/s end to end); peak RSS {child['peak_rss_mb']:.0f} MB\n"
          f"  rlvr verify's summary: {summary}")
    return {"records": len(out), "canonical_pass": passed, "broken_fail": failed, "seconds_end_to_end": seconds,
            "records_per_s_end_to_end": len(out) / seconds, "rlvr_verify_summary": summary,
            "peak_rss_mb": child["peak_rss_mb"]}


if __name__ == "__main__":
    main()
