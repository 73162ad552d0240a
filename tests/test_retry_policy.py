"""The one retry policy (``protocol.retry``): what it retries, how often, for how long, with
what backoff, what the error says at the end, and that it is the only retry loop of the
library (issue 33: six loops each had rules of their own)."""

from __future__ import annotations

import ast
import os
import re
import time

import pytest

from protocol.errors import (ConfigError, KafkaConnectionError, KafkaTimeoutError,
                             NotLeaderOrFollower)
from protocol.retry import RetryPolicy, is_retriable
from tests.helpers.library import ROOT, library_sources


def failing(errors: list[BaseException], then=None):
    """A call that raises ``errors`` in turn, then returns ``then``; it records when each
    attempt started."""
    started: list[float] = []

    def call(_tries):
        started.append(time.monotonic())
        if len(started) <= len(errors):
            raise errors[len(started) - 1]
        return then

    call.started = started
    return call


def gaps_ms(started: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in zip(started, started[1:])]


def test_the_backoff_doubles_up_to_its_cap():
    policy = RetryPolicy(backoff_ms=100, max_backoff_ms=350)
    assert [round(policy.delay_s(n) * 1000) for n in range(1, 6)] == [100, 200, 350, 350, 350]
    assert [RetryPolicy.fixed(1000, 3).delay_s(n) for n in (1, 2, 3)] == [1.0, 1.0, 1.0]


def test_a_retriable_error_is_retried_and_the_answer_returned():
    call = failing([KafkaConnectionError("refused"), NotLeaderOrFollower()], then="done")
    policy = RetryPolicy(backoff_ms=30, max_backoff_ms=1000, timeout_ms=5000)
    assert policy.run("a lookup", call) == "done"
    first, second = gaps_ms(call.started)
    assert first >= 30 and second >= 60  # waited, and twice as long the second time


def test_an_error_that_is_not_retriable_fails_at_once():
    call = failing([ConfigError("kafka.bootstrap.servers: bad")], then="never")
    with pytest.raises(ConfigError, match="bad"):
        RetryPolicy(backoff_ms=1, attempts=5).run("a lookup", call)
    assert len(call.started) == 1
    assert not is_retriable(ConfigError("x")) and not is_retriable(ValueError("x"))
    assert is_retriable(KafkaTimeoutError("x")) and is_retriable(NotLeaderOrFollower())


def test_the_count_running_out_keeps_the_error_and_says_what_was_tried():
    call = failing([KafkaConnectionError("connection refused")] * 5)
    with pytest.raises(KafkaConnectionError) as caught:
        RetryPolicy.fixed(20, 3).run("fetching offsets", call)
    assert len(call.started) == 3  # attempts, not retries: Spark's fetchOffset.numRetries
    message = str(caught.value)
    assert message.startswith("connection refused (fetching offsets: gave up after 3 attempts")
    waited = int(re.search(r"in (\d+) ms", message).group(1))
    assert waited >= 40  # the time it really took, two intervals at least


def test_the_time_running_out_is_a_timeout_naming_the_last_error():
    call = failing([NotLeaderOrFollower("not the leader")] * 1000)
    began = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as caught:
        RetryPolicy(backoff_ms=20, max_backoff_ms=40, timeout_ms=300).run("ListOffsets", call)
    assert time.monotonic() - began < 0.5  # no retry started past the timeout
    message = str(caught.value)
    assert message.startswith("ListOffsets did not succeed within 300 ms (gave up after ")
    assert "last error: " in message and "not the leader" in message


def test_a_caller_words_its_own_end():
    class Down(Exception):
        pass

    call = failing([Down("HTTP 503")] * 10)
    with pytest.raises(RuntimeError, match=r"registry: gave up after 2 attempts .*HTTP 503"):
        RetryPolicy(backoff_ms=1, attempts=2).run(
            "registry", call, retriable=lambda e: isinstance(e, Down),
            give_up=lambda tries, e: RuntimeError(f"registry: {tries.summary()}: {e}"))


def test_between_runs_before_each_new_attempt():
    seen = []
    call = failing([KafkaConnectionError("a"), KafkaConnectionError("b")], then=1)
    RetryPolicy(backoff_ms=1, attempts=5).run(
        "x", call, between=lambda tries, e: seen.append((tries.count, str(e))))
    assert seen == [(1, "a"), (2, "b")]


def test_a_waiting_budget_gives_kafkas_login_retry_count():
    # sasl.login.retry.backoff.ms=100, .max.ms=1000: waits 100+200+400 fit, +800 does not
    assert RetryPolicy.within_backoff(100, 1000).attempts == 4
    assert RetryPolicy.within_backoff(100, 50).attempts == 1


def test_progress_restarts_the_clock_and_the_backoff():
    tries = RetryPolicy(backoff_ms=10, max_backoff_ms=1000, timeout_ms=50).start("reading")
    assert tries.failed_once() == pytest.approx(0.01)
    assert tries.failed_once() == pytest.approx(0.02)
    time.sleep(0.06)
    assert tries.expired()
    tries.restart_clock()
    assert not tries.expired() and tries.failed_once() == pytest.approx(0.01)


def _loops_that_catch_and_sleep(path: str) -> list[int]:
    """Lines of the loops in ``path`` that both catch an exception and sleep: retry loops."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.While, ast.For)):
            inner = list(ast.walk(node))
            catches = any(isinstance(n, ast.Try) and n.handlers for n in inner)
            sleeps = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                         and n.func.attr == "sleep" for n in inner)
            if catches and sleeps:
                found.append(node.lineno)
    return found


def test_the_library_has_one_retry_loop():
    loops = {os.path.relpath(p, ROOT): lines for p in library_sources()
             if (lines := _loops_that_catch_and_sleep(p))}
    assert list(loops) == [os.path.join("protocol", "retry.py")], loops
    assert len(loops[os.path.join("protocol", "retry.py")]) == 1
