"""Kafka answers the fault proxy rewrites (``FaultProxy.rewrite_response``): a response
frame decoded to its body, changed, and encoded back with its length."""

from __future__ import annotations

from protocol.framing import decode_response_header


def decoded(api, frame: bytearray, version: int) -> tuple[int, dict]:
    """``(where the body starts after the length, the body)`` of ``api``'s answer."""
    view = memoryview(bytes(frame))[4:]
    _, pos = decode_response_header(api, version, view)
    body, _ = api.response.decode(version, view[pos:])
    return pos, body


def encoded(api, frame: bytearray, version: int, pos: int, body: dict) -> bytearray:
    """``frame`` with ``body`` in place of its own (same header, new length)."""
    out = bytearray(frame[: 4 + pos])
    api.response.encode(version, body, out)
    out[:4] = (len(out) - 4).to_bytes(4, "big")
    return out


def rewriting(api, change):
    """A rewrite of ``api``'s answers: ``change(body)`` edits the decoded body in place and
    says whether it did; an answer it leaves goes on as it came (and is not counted)."""

    def rewrite(frame: bytearray, version: int):
        pos, body = decoded(api, frame, version)
        if not change(body):
            return None
        return encoded(api, frame, version, pos, body)

    return rewrite
