"""Fake OpenAI (Chat Completions, Responses) and Anthropic (Messages) servers for the tests.

Each server binds 127.0.0.1 on an ephemeral port in a background thread, answers at most
``max_requests`` requests and shuts itself down after ``max_seconds``; the test that starts
one stops it (``with serve(...) as server``). A server plays a scripted model: request *k*
gets the assistant output for ``script[k]`` (a list of planned tool calls, or a final text).

Before answering, the server checks the request's history the way the real APIs do and
answers HTTP 400 with the reason otherwise:

- every tool call of an earlier assistant output is answered exactly once, and nothing
  answers an id that was never issued;
- Chat Completions: the tool messages come right after their assistant message (no other
  message in between) and carry text parts only;
- Responses: every ``function_call`` item has one ``function_call_output`` after it, whose
  ``output`` is text or ``input_text``/``input_image`` parts; the output items the server
  produced come back unchanged;
- Messages: roles alternate starting with ``user``; the message after an assistant
  ``tool_use`` turn is a user message whose ``tool_result`` blocks come first and answer
  every ``tool_use`` id; no empty text block.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import attrs

__all__ = ["Call", "FakeServer", "Rejected", "Step", "serve"]

PATHS: Final = {
    "openai_chat": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}
_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@attrs.frozen
class Call:
    """A tool call the scripted model makes: the tool and its raw argument text."""

    name: str
    arguments: str = "{}"


#: One scripted model turn: tool calls (made in parallel), or a final text answer.
Step = list[Call] | str


class Rejected(Exception):
    """The request breaks a rule the real API enforces (answered with HTTP 400)."""


@attrs.define(eq=False)
class FakeServer:
    """A running fake provider; ``requests`` holds every JSON body it received."""

    provider: str
    script: list[Step]
    max_requests: int
    url: str = ""
    requests: list[dict[str, Any]] = attrs.Factory(list)
    rejections: list[str] = attrs.Factory(list)
    issued: dict[str, dict[str, Any]] = attrs.Factory(dict)  # Responses items by id
    lock: threading.Lock = attrs.Factory(threading.Lock)
    ids: Iterator[int] = attrs.Factory(lambda: itertools.count(1))

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Check one request and return the status and the JSON answer."""
        with self.lock:
            self.requests.append(body)
            index = len(self.requests) - 1
            try:
                if path != PATHS[self.provider]:
                    raise Rejected(f"unexpected path {path}")
                if index >= min(self.max_requests, len(self.script)):
                    raise Rejected(f"request limit reached ({index} answered)")
                _check_tools(self.provider, body.get("tools"))
                check = {
                    "openai_chat": _check_chat,
                    "openai_responses": self._check_responses,
                    "anthropic_messages": _check_anthropic,
                }[self.provider]
                check(body)
            except Rejected as exc:
                self.rejections.append(str(exc))
                return 400, {"error": {"type": "invalid_request_error", "message": str(exc)}}
            return 200, self._answer(self.script[index], body)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids)}"

    def _answer(self, step: Step, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model", "fake")
        if self.provider == "openai_chat":
            message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
            if isinstance(step, str):
                message["content"] = step
            else:
                message["tool_calls"] = [
                    {
                        "id": self._new_id("call"),
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in step
                ]
            return {
                "id": self._new_id("chatcmpl"),
                "object": "chat.completion",
                "created": 1764590000,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "stop" if isinstance(step, str) else "tool_calls",
                        "logprobs": None,
                    }
                ],
            }
        if self.provider == "openai_responses":
            output: list[dict[str, Any]] = [
                {
                    "id": self._new_id("rs"),
                    "type": "reasoning",
                    "summary": [],
                    "encrypted_content": "x",
                }
            ]
            if isinstance(step, str):
                output.append(
                    {
                        "id": self._new_id("msg"),
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": step, "annotations": []}],
                    }
                )
            else:
                output.extend(
                    {
                        "id": self._new_id("fc"),
                        "type": "function_call",
                        "call_id": self._new_id("call"),
                        "name": c.name,
                        "arguments": c.arguments,
                        "status": "completed",
                    }
                    for c in step
                )
            for item in output:
                self.issued[item["id"]] = item
            return {
                "id": self._new_id("resp"),
                "object": "response",
                "created_at": 1764590000,
                "model": model,
                "status": "completed",
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "output": output,
            }
        content: list[dict[str, Any]] = [{"type": "text", "text": "Working on it."}]
        if isinstance(step, str):
            content = [{"type": "text", "text": step}]
        else:
            content.extend(
                {
                    "type": "tool_use",
                    "id": self._new_id("toolu"),
                    "name": c.name,
                    "input": json.loads(c.arguments),
                }
                for c in step
            )
        return {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "end_turn" if isinstance(step, str) else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    def _check_responses(self, body: dict[str, Any]) -> None:
        items = body.get("input")
        if not isinstance(items, list):
            raise Rejected("input must be a list")
        pending: dict[str, int] = {}
        answered: set[str] = set()
        for i, item in enumerate(items):
            kind = item.get("type")
            if item.get("id") in self.issued and item != self.issued[item["id"]]:
                raise Rejected(f"input[{i}]: output item {item['id']} was modified")
            if kind == "function_call":
                pending[item["call_id"]] = i
            elif kind == "function_call_output":
                call_id = item.get("call_id")
                if call_id not in pending:
                    raise Rejected(f"input[{i}]: no function call found for call_id {call_id}")
                if call_id in answered:
                    raise Rejected(f"input[{i}]: call_id {call_id} answered twice")
                answered.add(call_id)
                _check_output(i, item.get("output"))
        missing = sorted(set(pending) - answered)
        if missing:
            raise Rejected(f"no tool output found for function call {missing[0]}")


def _check_tools(provider: str, tools: object) -> None:
    if not isinstance(tools, list) or not tools:
        raise Rejected("tools must be a non-empty list")
    for tool in tools:
        if provider == "openai_chat":
            tool = tool.get("function", {}) if tool.get("type") == "function" else {}
            schema = tool.get("parameters")
        elif provider == "openai_responses":
            schema = tool.get("parameters") if tool.get("type") == "function" else None
        else:
            schema = tool.get("input_schema")
        if not _NAME.fullmatch(str(tool.get("name"))) or not isinstance(schema, dict):
            raise Rejected(f"invalid tool {tool!r}")


def _check_chat(body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages must be a non-empty list")
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise Rejected(
                    f"messages[{i}]: tool message must respond to a preceding tool_calls id"
                )
            pending.discard(call_id)
            content = message.get("content")
            if not isinstance(content, str) and not (
                isinstance(content, list) and all(p.get("type") == "text" for p in content)
            ):
                raise Rejected(f"messages[{i}]: tool message content must be text")
            continue
        if pending:
            raise Rejected(
                "an assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'; missing {sorted(pending)[0]}"
            )
        if role == "assistant":
            pending = {c["id"] for c in message.get("tool_calls") or ()}
    if pending:
        raise Rejected(f"missing tool message for {sorted(pending)[0]}")


def _check_output(i: int, output: object) -> None:
    if isinstance(output, str):
        return
    if not isinstance(output, list):
        raise Rejected(f"input[{i}].output must be a string or a list")
    for part in output:
        if part.get("type") == "input_image":
            if part.get("detail") not in ("auto", "low", "high"):
                raise Rejected(f"input[{i}]: input_image needs a detail")
        elif part.get("type") != "input_text":
            raise Rejected(f"input[{i}]: unsupported output part {part.get('type')}")


def _check_anthropic(body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages must be a non-empty list")
    pending: list[str] = []
    for i, message in enumerate(messages):
        expected = "user" if i % 2 == 0 else "assistant"
        if message.get("role") != expected:
            raise Rejected(f"messages[{i}]: roles must alternate, starting with user")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                raise Rejected(f"messages[{i}]: text content blocks must be non-empty")
        if pending:
            results = list(itertools.takewhile(lambda b: b.get("type") == "tool_result", blocks))
            if any(b.get("type") == "tool_result" for b in blocks[len(results) :]):
                raise Rejected(f"messages[{i}]: tool_result blocks must come first")
            ids = [b.get("tool_use_id") for b in results]
            if sorted(ids) != sorted(pending) or len(set(ids)) != len(ids):
                raise Rejected(
                    f"messages[{i}]: each tool_use id must have exactly one tool_result "
                    f"right after it; expected {pending}, got {ids}"
                )
            pending = []
        elif any(b.get("type") == "tool_result" for b in blocks):
            raise Rejected(f"messages[{i}]: unexpected tool_result block")
        if expected == "assistant":
            pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if pending:
        raise Rejected("the last assistant tool_use blocks have no tool_result")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # seconds a client may take to send its request

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            status, answer = 400, {"error": {"message": "body is not JSON"}}
        else:
            status, answer = self.server.fake.handle(self.path, body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the test reads ``requests`` and ``rejections`` instead


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@contextlib.contextmanager
def serve(
    provider: str, script: list[Step], *, max_requests: int = 8, max_seconds: float = 60.0
) -> Iterator[FakeServer]:
    """Run a fake ``provider`` on 127.0.0.1 for the duration of the ``with`` block.

    The server answers at most ``max_requests`` requests (400 afterwards) and stops by
    itself after ``max_seconds`` even if the block has not ended.
    """
    fake = FakeServer(provider=provider, script=script, max_requests=max_requests)
    server = _Server(fake)
    host, port = server.server_address[:2]
    fake.url = f"http://{host!s}:{port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    deadline = threading.Timer(max_seconds, server.shutdown)
    deadline.start()
    try:
        yield fake
    finally:
        deadline.cancel()
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
