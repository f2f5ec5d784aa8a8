"""Sandbox throughput: trivial executions/s cold vs warm vs local, and HumanEval judged end to end.

    python bench/bench_sandbox.py [--runs 200] [--workers 2] [--skip-humaneval]

Rows (each a throughput on this machine, all measured in the same run):
- `docker run` (SDK `containers.run(..., remove=True)`, no hardening): the plain cold baseline.
- cold sandbox: a fresh hardened container per execution (DockerSandbox(warm=False)).
- warm pool: DockerSandbox with `--workers` containers, reused.
- local backend: unshare + rlimits, one supervisor per execution.
- HumanEval: the 164 canonical solutions (must all pass) and 164 broken ones (body replaced by
  `return None`; must all fail) through CodeVerifier.verify_batch, the call `rlvr verify` makes.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor

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

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
          f"docker {client.version().get('Version')}; image {image}\n")
    print("| trivial program (`print(1)`) | executions/s | runs | seconds | concurrency |")
    print("|---|---|---|---|---|")
    runs = {"`docker run` (plain, cold)": args.cold_runs, "cold sandbox (fresh hardened container per run)": args.cold_runs,
            "warm pool": args.runs, "local backend": args.runs // 2}
    for name, per_s, seconds, workers in rows:
        print(f"| {name} | {per_s:.1f} | {runs[name]} | {seconds:.1f} | {workers} |")
    warm_rate = rows[2][1]
    print(f"\nwarm pool / plain docker run: {warm_rate / rows[0][1]:.1f}x; "
          f"warm pool / cold sandbox: {warm_rate / rows[1][1]:.1f}x")
    if not args.skip_humaneval:
        humaneval(args.workers)


def humaneval(workers: int) -> None:
    from rlvr.envs import load_env
    from rlvr.verifiers.code import CodeVerifier
    from rlvr.verifiers.result import Status

    rows = load_env("humaneval").rows("test", 164)
    completions = [r["reference"] for r in rows] + [f"```python\n{r['tests']['prefix']}    return None\n```" for r in rows]
    verifier = CodeVerifier(reward="binary", workers=workers)
    verifier.sandbox.warmup(verifier.limits)
    start = time.perf_counter()
    results = verifier.verify_batch(completions, rows + rows)
    seconds = time.perf_counter() - start
    verifier.close()
    passed = sum(r.status is Status.CORRECT for r in results[:164])
    failed = sum(r.status is not Status.CORRECT and r.reward == 0 for r in results[164:])
    print(f"\nHumanEval through verify_batch ({workers} workers, warm pool): canonical {passed}/164 pass, "
          f"broken {failed}/164 fail, 328 records in {seconds:.1f} s ({328 / seconds:.1f} records/s)")


if __name__ == "__main__":
    main()
