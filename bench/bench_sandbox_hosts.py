"""Sandbox throughput on one Docker engine vs two (`sandbox.hosts`), paired rounds in one run.

    python bench/bench_sandbox_hosts.py --second-host unix:///tmp/rd2/d.sock [--runs 200] [--rounds 3] [--workers 2]

The second engine must be running and hold the image (`rlvr sandbox build --hosts local,URL`); on one
machine, start one beside the default engine as tests/sandboxes/test_sandbox_hosts.py does (BENCHMARKS.md has the
command). Without --second-host the script says so and measures nothing.

Each round runs both arms back to back, `--runs` trivial executions (`print(1)`) each, warm pools
warmed first:
- one engine: DockerSandbox(hosts=[local], pool_size=W), W threads;
- two engines: DockerSandbox(hosts=[local, second], pool_size=W), 2W threads (the default a verifier uses).
The ratio (two / one) is taken per round; the median and range over rounds are reported. Two engines on
one machine share its cores, so this measures the spreading's cost, not a speed-up; on separate
machines each engine brings its own cores. Writes bench/results/sandbox_hosts.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import common

TRIVIAL = "print(1)\n"


def rate(sandbox, n: int, threads: int) -> float:
    """Executions/s for n runs of TRIVIAL over `threads` threads; each must print 1."""
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda _: sandbox.run(TRIVIAL), range(n)))
    seconds = time.perf_counter() - start
    bad = [r for r in results if r.stdout != "1\n"]
    assert not bad, f"{len(bad)} executions failed, e.g. {bad[0].status} {bad[0].stderr[:200]}"
    return n / seconds


def arm(hosts: list[str], runs: int, workers: int) -> float:
    from rlvr.sandboxes.docker_backend import DockerSandbox

    sandbox = DockerSandbox(pool_size=workers, hosts=hosts)
    try:
        sandbox.warmup()
        rate(sandbox, 2 * sandbox.capacity, sandbox.capacity)  # first use of each container
        return rate(sandbox, runs, sandbox.capacity)
    finally:
        sandbox.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--second-host", default=None, help="a running engine with the image, e.g. unix:///tmp/rd2/d.sock")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="containers per engine")
    args = parser.parse_args()
    if not args.second_host:
        print("bench_sandbox_hosts: no --second-host given; nothing measured (see the module docstring)")
        return
    load_before = common.load_average()
    rounds = []
    for i in range(args.rounds):
        one = arm(["local"], args.runs, args.workers)
        two = arm(["local", args.second_host], args.runs, args.workers)
        rounds.append({"round": i, "one_engine_per_s": one, "two_engines_per_s": two, "ratio": two / one})
    ratios = [r["ratio"] for r in rounds]
    print(common.machine_line())
    print(common.table(["round", "one engine (executions/s)", "two engines (executions/s)", "two / one"],
                       [[r["round"], f"{r['one_engine_per_s']:.1f}", f"{r['two_engines_per_s']:.1f}", f"{r['ratio']:.2f}x"]
                        for r in rounds]))
    print(f"\ntwo engines / one: median {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}), "
          f"{args.runs} runs per arm, {args.workers} containers per engine")
    common.write_json("sandbox_hosts", {"args": vars(args), "rounds": rounds, "median_ratio": statistics.median(ratios)},
                      load_before)


if __name__ == "__main__":
    main()
