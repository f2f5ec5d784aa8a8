"""`rlvr sandbox build|doctor`: the command's arguments, and what each action runs (sandboxes/image.py builds the
image, sandboxes/doctor.py probes the engine and the sandbox)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable

from rlvr.errors import ConfigError
from rlvr.sandboxes.hosts import apply_hosts


def sandbox_command(args: list[str], extra_rows: Callable[[str], Iterable[tuple]] | None = None) -> int:
    """`rlvr sandbox build|doctor [--hosts ...]`; `extra_rows(backend)` adds rows to the doctor's probe table (the
    CLI passes the code verifier's probes, which live above this package)."""
    parser = argparse.ArgumentParser(prog="rlvr sandbox", description="the Docker sandbox that runs untrusted code")
    sub = parser.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help="build the sandbox image (skipped when the content-tagged image exists)")
    build.add_argument("--builder", choices=["auto", "dockerfile", "debootstrap"], default="auto")
    build.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    doctor = sub.add_parser("doctor", help="engine, image, and a table of adversarial probes with their outcome")
    doctor.add_argument("--backend", choices=["docker", "local"], default="docker")
    for command in (build, doctor):
        command.add_argument("--hosts", default=None, metavar="H1,H2",
                             help="Docker engines (local, unix://, tcp://, ssh://), comma-separated; default: "
                                  "RLVR_SANDBOX_HOSTS, else the local engine (docs/scaling/sandbox-hosts.md)")
    options = parser.parse_args(args)
    try:
        hosts = apply_hosts([h.strip() for h in options.hosts.split(",")] if options.hosts else [], "--hosts")
    except ConfigError as error:
        print(f"rlvr sandbox {options.action}: {error}", file=sys.stderr)
        return 2
    if options.action == "build":
        from rlvr.sandboxes.docker_backend import SandboxUnavailable
        from rlvr.sandboxes.image import ensure_image_on_hosts

        try:
            print(ensure_image_on_hosts(hosts, builder=options.builder, force=options.force))
        except (SandboxUnavailable, RuntimeError) as error:
            print(f"rlvr sandbox build: {error}", file=sys.stderr)
            return 1
        return 0
    from rlvr.sandboxes.doctor import doctor as run_doctor

    rows = None if extra_rows is None else (lambda: extra_rows(options.backend))
    return run_doctor(options.backend, extra_rows=rows)
