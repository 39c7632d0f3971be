"""A fake OpenAI-compatible chat server for tests: real HTTP on 127.0.0.1, scripted replies.

There is no LLM (and no internet) where the tests run, yet the LLM path must be exercised end to
end through litellm and its HTTP client, so this server speaks just enough of the OpenAI wire
format: ``POST /v1/chat/completions`` (plain JSON or SSE streaming) and ``GET /v1/models``.

Each request pops the next entry of a script queue. An entry is one of:

* a string: the assistant message content;
* ``{"content": "..."}``: same, optionally with ``"delay": seconds`` to simulate a slow model
  (and, for streamed replies, ``"chunk_size"`` and ``"chunk_delay"`` between chunks);
* ``"gate"`` in such an entry: a ``threading.Event`` the reply waits for (a streamed reply: after
  its first chunk), so a test decides when the model "answers" (e.g. once the first words have
  reached the terminal, or once a concurrent command is done), whatever the machine's load;
* ``{"status": 500}`` (or 429, 400, ...): an HTTP error with an OpenAI-style error body;
* ``{"raw": "not json at all"}``: a 200 whose body is the given bytes verbatim;
* ``{"content": "...", "finish_reason": "length"}``: a reply the server cut at ``max_tokens``.

When the queue is empty the ``default`` entry is used (``None`` means answer 500), so a test that
forgets to script a reply fails loudly instead of hanging. Every request body (parsed JSON) is
appended to ``requests`` so tests can assert on what was sent and how many calls were made.

Use either the ``llm_server`` pytest fixture or ``FakeLLMServer`` as a context manager.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

ScriptEntry = str | dict[str, Any]
GATE_TIMEOUT = 60.0  # seconds a gated reply is held back at most (then sent: a test never hangs)


class _Handler(BaseHTTPRequestHandler):
    """Request handler; all state lives on the owning FakeLLMServer (``self.server.owner``)."""

    protocol_version = "HTTP/1.1"  # keep-alive, like a real server; every reply has a length

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the default stderr access log: it would clutter pytest output."""

    # -- helpers -------------------------------------------------------------------------------
    @property
    def owner(self) -> FakeLLMServer:
        return self.server.owner  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    # -- endpoints -----------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        entry = self.owner._record_and_pop(body)
        self._reply(entry, body)
        with self.owner._lock:
            self.owner.replies += 1

    def _reply(self, entry: ScriptEntry | None, body: dict[str, Any]) -> None:
        if entry is None:
            self._send_json(500, {"error": {"message": "fake server: script exhausted", "type": "server_error"}})
            return
        if isinstance(entry, str):
            entry = {"content": entry}
        delay = float(entry.get("delay", 0) or 0)
        if delay:
            time.sleep(delay)
        if entry.get("gate") is not None and not body.get("stream"):
            entry["gate"].wait(GATE_TIMEOUT)
        if "status" in entry and int(entry["status"]) != 200:
            status = int(entry["status"])
            message = entry.get("message", f"fake error {status}")
            self._send_json(status, {"error": {"message": message, "type": "fake_error", "code": status}})
            return
        if "raw" in entry:
            self._send(200, str(entry["raw"]).encode())
            return
        content = str(entry.get("content", ""))
        model = body.get("model", "fake-model")
        if body.get("stream"):
            self._stream(content, model, body, chunk_size=int(entry.get("chunk_size", 7)),
                         chunk_delay=float(entry.get("chunk_delay", 0) or 0), gate=entry.get("gate"))
        else:
            self._send_json(200, _completion(content, model, body, entry.get("finish_reason", "stop")))

    def _stream(self, content: str, model: str, body: dict[str, Any], chunk_size: int,
                chunk_delay: float = 0.0, gate: threading.Event | None = None) -> None:
        """SSE chunks of ``choices[0].delta.content``, a usage chunk if asked for, then ``[DONE]``.

        ``chunk_delay`` (entry key ``"chunk_delay"``) sleeps between chunks, like a model
        generating tokens, so a test can tell a streamed answer from a buffered one.

        The response uses Connection: close with no length (like many real servers stream), so
        the client reads until EOF.
        """
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        created = int(time.time())
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created, "model": model}
        pieces = [content[i : i + chunk_size] for i in range(0, len(content), chunk_size)] or [""]
        first = True
        for n, piece in enumerate(pieces):
            if n == 1 and gate is not None:
                gate.wait(GATE_TIMEOUT)
            if n and chunk_delay:
                time.sleep(chunk_delay)
            delta: dict[str, Any] = {"content": piece}
            if first:
                delta["role"] = "assistant"
                first = False
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage"):  # as OpenAI does: only on request
            usage = {**base, "choices": [], "usage": _usage(content, body)}
            self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _usage(content: str, body: dict[str, Any] | None = None) -> dict[str, int]:
    """Deterministic fake token counts (roughly 4 characters a token) so tests can assert sums."""
    prompt = json.dumps((body or {}).get("messages", ""))
    p, c = max(1, len(prompt) // 4), max(1, len(content) // 4)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _completion(content: str, model: str, body: dict[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": _usage(content, body),
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping in a "delay" must not block shutdown

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout tests) leaves a broken pipe: expected, not worth a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeLLMServer:
    """A scripted OpenAI-compatible server on a free 127.0.0.1 port, in a daemon thread.

    Attributes: ``url`` (the api_base, ending in ``/v1``), ``model`` (the litellm model string to
    use with it), ``requests`` (parsed request bodies, in arrival order), ``default`` (the entry
    served when the script is empty; ``None`` = HTTP 500).
    """

    model = "openai/fake-model"

    def __init__(self, default: ScriptEntry | None = None) -> None:
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.replies = 0  # replies written in full (a gated one counts once its gate opened)
        self._queue: deque[ScriptEntry] = deque()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self  # type: ignore[attr-defined]
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def script(self, entries: list[ScriptEntry]) -> None:
        """Append replies to the queue (each request consumes one)."""
        with self._lock:
            self._queue.extend(entries)

    def reset(self) -> None:
        """Forget queued replies and logged requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.replies = 0

    def _record_and_pop(self, body: dict[str, Any]) -> ScriptEntry | None:
        with self._lock:
            self.requests.append(body)
            return self._queue.popleft() if self._queue else self.default

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close the socket and join the thread, so no port or thread leaks."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A running FakeLLMServer, shut down at teardown."""
    with FakeLLMServer() as server:
        yield server
