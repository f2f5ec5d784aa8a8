"""The driver of a PythonSession call, run as its trusted checker (session.py says why): it holds the cells
(its stdin, a JSON list), sends each on fd 4 after the last was acknowledged on fd 3, and writes `ready` then
`<index> ok|error <seconds since ready>` per acknowledgement to the verdict channel (fd 5). When the program stops
answering it waits for the program's exit, so the supervisor reads its real end (a signal: CPU time, memory)
rather than stopping it.

Standard library only; session.py ships this file's text as the checker program (run as __main__). Importing it
on the host runs nothing."""

import json, os, select, time


def _main():
    data = b""
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        data += chunk
    cells, pending = json.loads(data), [b""]

    def line():
        while b"\n" not in pending[0]:
            chunk = os.read(3, 4096)
            if not chunk or len(pending[0]) > 4096:  # an acknowledgement is short
                return None
            pending[0] += chunk
        out, _, pending[0] = pending[0].partition(b"\n")
        return out

    hello = (line() or b"").split()
    if len(hello) != 2 or hello[0] != b"ready" or not hello[1].isdigit():
        return
    start = time.monotonic()
    os.write(5, b"ready\n")
    for index, source in enumerate(cells):
        nonce = os.urandom(16).hex().encode()
        body = source.encode("utf-8", "surrogatepass")
        data = b"%s %d %d\n" % (nonce, index == len(cells) - 1, len(body)) + body
        try:
            while data:
                data = data[os.write(4, data):]
        except OSError:
            break
        ack = line()
        if ack not in (nonce + b" ok", nonce + b" error"):
            break
        os.write(5, f"{index} {ack.split()[1].decode()} {time.monotonic() - start:.3f}\n".encode())
        if ack.endswith(b" error"):
            break
        if index == len(cells) - 1:
            return
    try:
        process = os.pidfd_open(int(hello[1]))
    except OSError:
        return
    select.select([process], [], [], 30.0)


if __name__ == "__main__":
    _main()
