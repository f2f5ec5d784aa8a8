"""Where an overlapped step's scoring time goes on this machine: one step's worth of code_stdio completions
scored in the Docker sandbox alone, beside a busy Python thread in the same process (what the asynchronous
producer's generate or the trainer's update is to the scoring threads: GIL and a core), and beside a busy
separate process (a core, no GIL).

    python bench/bench_score_contention.py [--completions 64] [--repeats 3] [--workers 2]

The completions are env_samples.py's reference programs for code_stdio rows (three stdin/stdout cases each,
so 3 x completions sandbox runs), scored by `verifier=code` (backend docker, the default warm pool of
`--workers` containers). The three conditions alternate within each repeat. Per condition: the median
seconds, and the machine's busy cores during the scoring (from /proc/stat: every process on the machine,
so other jobs count too). If a busy thread slows scoring about as much as a busy process, the loss is the
cores, not the GIL. Writes bench/results/score_contention.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import threading
import time

import common
import env_samples


def busy_cores_since(start: tuple[int, int]) -> float:
    """Busy cores (all processes) between `start` (a `cpu_ticks()`) and now."""
    busy, total = cpu_ticks()
    return (busy - start[0]) / max(total - start[1], 1) * (common.machine()["cores"] or 1)


def cpu_ticks() -> tuple[int, int]:
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)  # everything but idle and iowait; all


def spin(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=64)  # bench_async's step: 8 prompts x 8 completions
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="sandbox containers (the verifier's default: the CPU count)")
    args = parser.parse_args()
    from rlvr.verifiers.code.verifier import CodeVerifier

    rng = random.Random(0)
    rows = [env_samples.code_row(rng) for _ in range(args.completions)]
    completions = [f"```python\n{row['solution']}\n```" for row in rows]
    records = [{"tests": {"kind": "stdio", "cases": row["tests"]}} for row in rows]
    verifier = CodeVerifier(workers=args.workers)
    load_before = common.load_average()
    print(common.machine_line(), flush=True)
    try:
        verifier.verify_batch(completions[:8], records[:8])  # start the warm pool
        times: dict[str, list[float]] = {"alone": [], "busy thread": [], "busy process": []}
        cores: dict[str, list[float]] = {name: [] for name in times}
        for _ in range(args.repeats):
            for name in times:
                stop, thread, proc = threading.Event(), None, None
                if name == "busy thread":
                    thread = threading.Thread(target=spin, args=(stop,), daemon=True)
                    thread.start()
                elif name == "busy process":
                    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(0.2)
                ticks, began = cpu_ticks(), time.perf_counter()
                results = verifier.verify_batch(completions, records)
                times[name].append(time.perf_counter() - began)
                cores[name].append(busy_cores_since(ticks))
                stop.set()
                if thread is not None:
                    thread.join()
                if proc is not None:
                    proc.kill()
                    proc.wait()
                if sum(r.status.value == "correct" for r in results) != len(results):
                    raise SystemExit(f"{name}: a reference program was not scored correct: the sandbox is not healthy")
    finally:
        verifier.close()
    alone = statistics.median(times["alone"])
    rows_out = [[name, f"{statistics.median(t):.2f}", f"{statistics.median(t) / alone:.2f}x",
                 f"{statistics.median(cores[name]):.2f}", " ".join(f"{x:.2f}" for x in t)] for name, t in times.items()]
    common.write_json("score_contention", {"args": vars(args), "seconds": times, "busy_cores": cores}, load_before)
    print(f"load average before {load_before}, after {common.load_average()}")
    print(common.table(["condition", "seconds (median)", "vs alone", "machine busy cores", "every repeat"], rows_out))


if __name__ == "__main__":
    main()
