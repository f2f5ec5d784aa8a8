"""What the host holds and believes from a supervisor: capped buffers and replies bound to their job.

The supervisor side is a stand-in here (one end of a socketpair speaking Docker's attach framing,
or a shell command for the local backend): these pin the host's bookkeeping against a supervisor
that misbehaves, which the real one cannot be made to do (test_sandbox_*.py and the
"reach the supervisor" probe show the program cannot reach it).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading

import pytest
from rlvr.sandboxes.base import STDERR_CAP, Limits, reply_cap
from rlvr.sandboxes.docker_backend import AgentContainer, AgentGone
from rlvr.sandboxes.local_backend import _exchange

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def stand_in(script):
    """An AgentContainer whose socket is served by `script(peer, job)` on a thread."""
    ours, peer = socket.socketpair()
    box = object.__new__(AgentContainer)
    box.sock, box.dirty, box._buffer, box._stderr = ours, False, bytearray(), bytearray()

    def serve():
        job = json.loads(peer.makefile("rb").readline())
        try:
            script(peer, job)
        except OSError:  # the host hung up first: fine
            pass
        finally:
            peer.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return box, thread


def reply(job, **fields) -> bytes:
    return (json.dumps({"job_id": job["job_id"], "status": "exited", "stdout": "", "stderr": "", "exit_code": 0,
                        "wall_s": 0.0, "cpu_s": 0.0, "peak_memory_bytes": 0, "dirty": False, **fields}) + "\n").encode()


JOB = {"job_id": "abc123", "program": "", "stdin": "", "limits": {}}


def test_supervisor_stderr_is_capped_and_overflow_marks_dirty():
    def flood(peer, job):
        for _ in range(64):
            peer.sendall(frame(2, b"e" * 65536))  # 4 MiB of stderr
        peer.sendall(frame(1, reply(job)))

    box, thread = stand_in(flood)
    assert box.request(dict(JOB), timeout=30, reply_cap=reply_cap(Limits()))["status"] == "exited"
    thread.join()
    assert len(box._stderr) <= STDERR_CAP and box.dirty


def test_quiet_stderr_keeps_the_container_clean():
    box, thread = stand_in(lambda peer, job: peer.sendall(frame(2, b"note\n") + frame(1, reply(job))))
    box.request(dict(JOB), timeout=30, reply_cap=reply_cap(Limits()))
    thread.join()
    assert not box.dirty


def test_a_reply_past_its_cap_is_refused():
    def endless(peer, job):
        for _ in range(40):
            peer.sendall(frame(1, b"x" * 65536))

    box, thread = stand_in(endless)
    with pytest.raises(AgentGone, match="passed"):
        box.request(dict(JOB), timeout=30, reply_cap=1 << 20)
    box.sock.close()
    thread.join()


@pytest.mark.parametrize("payload", [
    lambda job: reply({**job, "job_id": "another"}),
    lambda job: reply({k: v for k, v in job.items() if k != "job_id"} | {"job_id": None}),
    lambda job: b"not json\n",
    lambda job: reply(job) + reply(job),
], ids=["another job's id", "no id", "unreadable", "two replies"])
def test_a_reply_not_for_this_job_is_refused(payload):
    box, thread = stand_in(lambda peer, job: peer.sendall(frame(1, payload(job))))
    with pytest.raises(AgentGone):
        box.request(dict(JOB), timeout=30, reply_cap=reply_cap(Limits()))
    thread.join()


@pytest.mark.parametrize("command", ["head -c 3000000 /dev/zero", "head -c 3000000 /dev/zero >&2"],
                         ids=["stdout", "stderr"])
def test_local_backend_reads_a_supervisor_only_up_to_its_caps(command):
    proc = subprocess.Popen(["sh", "-c", f"cat >/dev/null; {command}"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        with pytest.raises(BufferError):
            _exchange(proc, b"{}\n", timeout=30, cap=1 << 20)
    finally:
        proc.kill()
        proc.wait()
