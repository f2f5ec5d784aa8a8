"""A fake OpenAI-compatible judge for tests: an HTTP server in a thread whose reply is `handler(prompt)`.

`handler` returns the reply text, or None to hang (the request is held until the server stops). `requests` counts
what the server was asked, and `prompts` keeps them.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeJudge:
    def __init__(self, handler):
        self.handler, self.prompts = handler, []
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
                owner.prompts.append(prompt)
                text = owner.handler(prompt)
                if text is None:  # hang: hold the request until the test ends
                    owner.release.wait(60)
                    return
                choice = {"message": {"role": "assistant", "content": text}} if "messages" in body else {"text": text}
                data = json.dumps({"choices": [choice]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def requests(self) -> int:
        return len(self.prompts)

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def response_of(prompt: str) -> str:
    """The response a default template put between its markers."""
    return re.search(r"<<<\n(.*)\n>>>", prompt, re.DOTALL).group(1)


def gold_of(prompt: str) -> str:
    return re.search(r"Reference answer:\n(.*?)\n\n", prompt, re.DOTALL).group(1)


def fair(prompt: str) -> str:
    """A judge that says CORRECT only when the response is exactly the gold answer."""
    return "CORRECT" if response_of(prompt).strip() == gold_of(prompt).strip() else "INCORRECT"
