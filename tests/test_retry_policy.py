"""The one retry policy (``protocol.retry``): what it retries (one table keyed by error
codes and exception types), how often, for how long, with what backoff, what the error
says at the end. The library's loops are driven to their end on a fake clock that counts
their waits (a Kafka request, a driver lookup, a registry call, a token endpoint), and no
other module sleeps or keeps a count beside a wait."""

from __future__ import annotations

import ast
import os
import re
import textwrap
import threading
import time

import pytest

from protocol.config import ClientConfig
from protocol.errors import (
    AuthenticationError,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotLeaderOrFollower,
)
from protocol.retry import DRIVER_LOOKUP, PRODUCE, REQUEST, RetryPolicy, RetryRule, is_retriable
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
    assert first >= 24 and second >= 48  # waited (less 20 % jitter at most), then longer


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
            "registry",
            call,
            retriable=lambda e: isinstance(e, Down),
            give_up=lambda tries, e: RuntimeError(f"registry: {tries.summary()}: {e}"),
        )


def test_between_runs_before_each_new_attempt():
    seen = []
    call = failing([KafkaConnectionError("a"), KafkaConnectionError("b")], then=1)
    RetryPolicy(backoff_ms=1, attempts=5).run(
        "x", call, between=lambda tries, e: seen.append((tries.count, str(e)))
    )
    assert seen == [(1, "a"), (2, "b")]


def test_a_waiting_budget_gives_kafkas_login_retry_count():
    # sasl.login.retry.backoff.ms=100, .max.ms=1000: waits 100+200+400 fit, +800 does not
    assert RetryPolicy.within_backoff(100, 1000).attempts == 4
    assert RetryPolicy.within_backoff(100, 50).attempts == 1


def test_progress_restarts_the_clock_and_the_backoff(monkeypatch):
    clock = [1000.0]  # a fake clock: a loaded machine must not move the deadline
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    tries = RetryPolicy(backoff_ms=10, max_backoff_ms=1000, timeout_ms=50, jitter=0).start(
        "reading"
    )
    assert tries.failed_once() == pytest.approx(0.01)
    assert tries.failed_once() == pytest.approx(0.02)
    clock[0] += 0.06
    assert tries.expired()
    tries.restart_clock()
    assert not tries.expired() and tries.failed_once() == pytest.approx(0.01)


def test_the_backoff_has_jitter_within_its_cap():
    policy = RetryPolicy(backoff_ms=100, max_backoff_ms=1000)
    firsts = {policy.jittered_delay_s(1) for _ in range(50)}
    assert len(firsts) > 1 and all(0.08 <= d <= 0.12 for d in firsts)
    assert all(0.8 <= policy.jittered_delay_s(20) <= 1.0 for _ in range(50))  # never past it
    assert RetryPolicy.fixed(1000, 3).jittered_delay_s(2) == 1.0  # Spark's interval: exact


def test_the_client_options_name_the_backoff():
    policy = RetryPolicy.for_client(ClientConfig(bootstrap_servers="h:1"), timeout_ms=5)
    assert (policy.backoff_ms, policy.max_backoff_ms, policy.timeout_ms) == (100, 1000, 5)
    config = ClientConfig(bootstrap_servers="h:1", retry_backoff_ms=7, retry_backoff_max_ms=70)
    assert (
        RetryPolicy.for_client(config).backoff_ms,
        RetryPolicy.for_client(config).max_backoff_ms,
    ) == (7, 70)


def test_one_table_says_what_each_kind_of_call_retries():
    authz = BrokerError.for_code(29, topic="a")  # TOPIC_AUTHORIZATION_FAILED
    cut, bad = KafkaConnectionError("cut"), ConfigError("kafka.x: bad")
    request, lookup, check = REQUEST, DRIVER_LOOKUP, PRODUCE
    assert request(cut) and lookup(cut) and not check(cut)  # a Produce answer is not a cut
    # a refusal is never retried (Spark's withRetries retries authorization failures)
    sign_in = AuthenticationError("SASL SCRAM-SHA-256 authentication of user 'u' failed")
    sasl = BrokerError.for_code(58)  # SASL_AUTHENTICATION_FAILED
    for refused in (authz, *(BrokerError.for_code(c) for c in (30, 31, 53)), sign_in, sasl):
        assert not request(refused) and not lookup(refused) and not check(refused), refused
    assert not request(bad) and not lookup(bad) and not check(bad)
    assert not lookup(ValueError("not Kafka's"))
    # keyed by codes: Kafka's retriable flag, and the codes a fresh metadata cures
    not_leader, fenced_epoch = BrokerError.for_code(6), BrokerError.for_code(74)
    out_of_order, too_large = BrokerError.for_code(45), BrokerError.for_code(10)
    assert request(not_leader) and request(fenced_epoch) and not request(out_of_order)
    assert check(out_of_order) and check(not_leader) and not check(too_large)
    assert lookup(too_large)  # any failure of the cluster, for a driver lookup

    # and by exception types, a caller's own rows
    class Unavailable(Exception):
        pass

    own = RetryRule(types=(Unavailable,))
    assert own(Unavailable()) and not own(cut) and REQUEST.also(Unavailable)(Unavailable())


def test_an_attempts_object_counts_the_attempts_started():
    tries = RetryPolicy(attempts=2).start("sending")
    tries.begin()
    assert not tries.exhausted()
    tries.begin()
    assert tries.exhausted() and tries.made == 2
    assert not RetryPolicy().start("no limit").exhausted()


# ---- the guard: no module but the policy's sleeps or counts retries ----------------------

#: A word of a name that counts attempts (``attempt``, ``retries``, ``tries``...).
_RETRY_WORDS = {"attempt", "attempts", "retry", "retries", "tries", "tried", "resend", "resends"}

#: What the guard finds that is not a retry, by module and what it found; why next to each.
ALLOWED = {
    # the idle-client reaper thread waits for its next expiry or to be woken: no retry
    (os.path.join("protocol", "client", "pool.py"), "self._wake.wait(timeout) as a sleep"),
    # a caller waits (at most its patience) for another thread's token refresh to end
    (os.path.join("kafka_common", "oauth", "tokens.py"), "done.wait(timeout) as a sleep"),
    # an LZ4 frame is decoded with its header as written and as repaired: two readings of
    # the same bytes, nothing waited for
    (os.path.join("protocol", "records", "compression.py"), "loop over attempt"),
}

#: The policy's own modules: the only ones that sleep between attempts.
POLICY = {os.path.join("protocol", "retry.py")}


#: The waits of the library's loops: only the policy's ``Attempts`` may count beside them.
_WAITS = {"sleep", "pause", "pause_until"}


def _words(name: str) -> set[str]:
    return set(re.split(r"_+|(?<=[a-z])(?=[A-Z])", name.lower()))


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return None


def _counts_retries(target: ast.AST) -> bool:
    name = _name(target)
    return name is not None and bool(_words(name) & _RETRY_WORDS)


def _is_int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _in_functions(tree: ast.AST):
    """The nodes inside function bodies (a class's or module's constants are not counters)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from ast.walk(node)


def retry_findings(source: str, path: str = "<snippet>") -> list[tuple[int, str]]:
    """``(line, what)`` of each sleep, ``wait(timeout)`` used as one, and retry counter
    (``attempt += 1``, ``retries -= 1``, ``tries = 0``, ``for attempt in range(n)``) in
    ``source``."""
    tree = ast.parse(source, path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "sleep":
            found.add((node.lineno, f"{ast.unparse(node.func)}()"))
        elif (
            isinstance(node, ast.Call)
            and _name(node.func) == "wait"
            and (node.args or node.keywords)
        ):
            found.add((node.lineno, f"{ast.unparse(node.func)}(timeout) as a sleep"))
        elif (
            isinstance(node, (ast.For, ast.comprehension))
            and _counts_retries(node.target)
            and isinstance(node.iter, ast.Call)
            and _name(node.iter.func) == "range"
        ):
            found.add((node.target.lineno, f"loop over {_name(node.target)}"))
    for loop in ast.walk(tree):  # a count kept beside the policy's waits, whatever its name
        if isinstance(loop, (ast.For, ast.While)):
            inside = list(ast.walk(loop))
            if any(isinstance(n, ast.Call) and _name(n.func) in _WAITS for n in inside):
                found.update(
                    (n.lineno, f"counter {ast.unparse(n.target)} beside a wait")
                    for n in inside
                    if isinstance(n, ast.AugAssign)
                    and isinstance(n.op, (ast.Add, ast.Sub))
                    and isinstance(n.value, ast.Constant)
                    and n.value.value == 1
                )
    for node in _in_functions(tree):
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, (ast.Add, ast.Sub))
            and _counts_retries(node.target)
        ):
            found.add((node.lineno, f"counter {ast.unparse(node.target)}"))
        elif isinstance(node, ast.Assign) and _is_int(node.value):
            found.update(
                (node.lineno, f"counter {ast.unparse(t)}")
                for t in node.targets
                if _counts_retries(t)
            )
        elif (
            isinstance(node, ast.AnnAssign) and _is_int(node.value) and _counts_retries(node.target)
        ):
            found.add((node.lineno, f"counter {ast.unparse(node.target)}"))
    return sorted(found)


def test_only_the_policy_sleeps_or_counts_retries():
    offenders, allowed_seen = [], set()
    for path in library_sources():
        rel = os.path.relpath(path, ROOT)
        if rel in POLICY:
            continue
        with open(path, encoding="utf-8") as f:
            for line, what in retry_findings(f.read(), path):
                if (rel, what) in ALLOWED:
                    allowed_seen.add((rel, what))
                else:
                    offenders.append(f"{rel}:{line}: {what}")
    assert not offenders, (
        "retry outside protocol.retry (hold an Attempts of a "
        "RetryPolicy instead):\n" + "\n".join(offenders)
    )
    assert allowed_seen == ALLOWED, f"stale entries: {ALLOWED - allowed_seen}"


def test_the_guard_catches_a_loop_written_outside_the_policy():
    snippet = textwrap.dedent("""
        import time, threading

        def fetch(call):
            attempts = 0
            while True:
                try:
                    return call()
                except OSError:
                    attempts += 1
                    time.sleep(0.1)

        def spread(self):
            self.retries -= 1
            self.stop.wait(0.5)
            for attempt in range(3):
                pass

        LIMIT_ATTEMPTS = 3   # a constant, not a counter
        stop = threading.Event()

        def wait_for_signal():
            stop.wait()      # waits for a signal, not a sleep

        def poll(ready):
            n = 0
            while not ready():
                n += 1
                pause(0.1)
    """)
    assert [what for _, what in retry_findings(snippet)] == [
        "counter attempts",
        "counter attempts",
        "counter attempts beside a wait",
        "time.sleep()",
        "counter self.retries",
        "self.stop.wait(timeout) as a sleep",
        "loop over attempt",
        "counter n beside a wait",
    ]


def test_a_client_retry_inside_another_makes_one_attempt():
    """OffsetFetch looks its coordinator up inside its own attempt: the lookup does not
    loop inside the outer loop, the outer loop retries both."""
    from protocol.client.cluster import KafkaClient

    client = KafkaClient(
        bootstrap_servers="127.0.0.1:1", retry_backoff_ms=1, connect_timeout_ms=200
    )
    inner_calls = []

    def inner():
        inner_calls.append(1)
        if len(inner_calls) < 3:
            raise KafkaConnectionError("coordinator moved")
        return "found"

    outer_calls = []

    def outer():
        outer_calls.append(1)
        return client.retrying("inner", inner)

    assert client.retrying("outer", outer, 5000) == "found"
    assert len(inner_calls) == len(outer_calls) == 3 and not client._retrying


def test_the_backoff_options_reach_every_retry_on_both_sides():
    """``kafka.retry.backoff.ms`` / ``kafka.retry.backoff.max.ms``, as Kafka's clients name
    them, set the policy of the reader's and the writer's clients alike; a maximum below
    the first wait makes every wait that long, as in Kafka's clients."""
    from kafka_sink.options import parse_writer_options
    from kafka_source.options import parse_reader_options

    base = {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "topic": "t",
        "kafka.retry.backoff.ms": "50",
        "kafka.retry.backoff.max.ms": "400",
    }
    reader = parse_reader_options({**base, "subscribe": "t"}, for_streaming=False)
    writer = parse_writer_options(base)
    for config in (reader.client_config, writer.client_config):
        policy = RetryPolicy.for_client(config)
        assert (policy.backoff_ms, policy.max_backoff_ms) == (50, 400)
    assert writer.retry_backoff_ms == 50
    low = parse_writer_options({**base, "kafka.retry.backoff.max.ms": "20"}).client_config
    assert (low.retry_backoff_ms, low.retry_backoff_max_ms) == (20, 20)
    defaults = parse_writer_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    assert (
        defaults.client_config.retry_backoff_ms,
        defaults.client_config.retry_backoff_max_ms,
    ) == (100, 1000)
    with pytest.raises(ConfigError, match="kafka.retry.backoff.max.ms"):
        parse_writer_options({**base, "kafka.retry.backoff.max.ms": "soon"})


def test_the_producer_s_metadata_refreshes_back_off_under_the_policy(monkeypatch):
    """A refresh that fails waits the resend policy's backoff before the next one, growing
    from kafka.retry.backoff.ms to .max.ms (with jitter) while refreshes keep failing, and
    starting over once one succeeds."""
    from kafka_sink.options import parse_writer_options
    from kafka_sink.producer import TaskProducer

    class Client:
        fail = True

        def refresh_metadata(self, topics):
            if self.fail:
                raise KafkaConnectionError("broker down")
            return type("Meta", (), {"topics": {}})()

    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    options = parse_writer_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "kafka.retry.backoff.ms": "100"}
    )
    client = Client()
    producer = TaskProducer(options, client=client)

    def next_wait() -> float:
        clock[0] = producer.leaders.retry_at
        producer.leaders.refresh()
        return producer.leaders.retry_at - clock[0]

    waits = [next_wait() for _ in range(6)]
    for wait, base in zip(waits, (0.1, 0.2, 0.4, 0.8, 1.0, 1.0)):
        assert base * 0.8 - 1e-9 <= wait <= min(base * 1.2, 1.0) + 1e-9, waits
    client.fail = False
    next_wait()  # succeeds: every queued partition has a leader
    client.fail = True
    assert 0.08 - 1e-9 <= next_wait() <= 0.12 + 1e-9


def test_waiting_when_no_attempt_is_left_returns_at_once(monkeypatch):
    """``Attempts.wait`` with the count spent before the deadline: no wait for an attempt
    that will not be made (it slept the whole time left)."""
    clock = [1000.0]  # a fake clock and sleep: the waits are counted, not timed
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(time, "sleep", sleep)
    tries = RetryPolicy(backoff_ms=100, attempts=2, timeout_ms=60_000, jitter=0).start("x")
    first = tries.wait()
    assert slept == [pytest.approx(0.1)]
    second = tries.wait()  # the count is spent
    assert slept == [pytest.approx(0.1)] and (first, second) == (True, False)
    # with time but no count: the backoff, and at the end what is left of the time
    tries = RetryPolicy(backoff_ms=100, timeout_ms=250, jitter=0).start("y")
    assert [tries.wait(), tries.wait()] == [True, True]
    assert slept[1:] == [pytest.approx(0.1), pytest.approx(0.15)]
    assert tries.time_left_s() == pytest.approx(0.0)


def test_a_retry_without_a_count_says_until_when(monkeypatch, caplog):
    import logging

    from kafka_common.retries import with_retries

    monkeypatch.setattr(time, "sleep", lambda _s: None)
    call = failing([BrokerError.for_code(-1)] * 2, then="ok")  # not Kafka-retriable
    with caplog.at_level(logging.WARNING, logger="test.retries"):
        result = with_retries(
            "checking",
            lambda: call(None),
            config=ClientConfig(),
            attempts=None,
            log=logging.getLogger("test.retries"),
            deadline=time.monotonic() + 60,
        )
    assert result == "ok"
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all(
        re.search(r"\(attempt \d, until \d\d:\d\d:\d\d\)", m) for m in said
    ), said


class FakeClock:
    """``time.monotonic`` and ``time.sleep`` as the test's own thread sees them: a sleep
    moves the clock and is counted, so a test sees every wait a loop makes and how long it
    was. Other threads of the session (a pool's reaper, py4j's) keep the real clock: their
    waits are neither counted nor turned into a busy loop."""

    def __init__(self, monkeypatch):
        self.now, self.waits = 1_000.0, []
        self._thread = threading.get_ident()
        real_monotonic, real_sleep = time.monotonic, time.sleep
        monkeypatch.setattr(
            time, "monotonic", lambda: self.now if self._mine() else real_monotonic()
        )
        monkeypatch.setattr(
            time, "sleep", lambda s: self.sleep(s) if self._mine() else real_sleep(s)
        )

    def _mine(self) -> bool:
        return threading.get_ident() == self._thread

    def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds * 1000))
        self.now += seconds


def test_the_fake_clock_counts_the_test_s_own_waits_only(monkeypatch):
    """Another thread of the session that sleeps in a loop (a pool's reaper, a proxy)
    keeps real time: its waits neither reach the test's count nor spin."""
    clock = FakeClock(monkeypatch)
    ends = []

    def other():
        started = time.monotonic()
        for _ in range(5):
            time.sleep(0.01)
        ends.append(time.monotonic() - started)

    thread = threading.Thread(target=other)
    thread.start()
    time.sleep(2.0)
    thread.join(10)
    assert clock.waits == [2000]
    assert ends and ends[0] >= 0.05


def test_a_driver_lookup_is_one_loop_with_kafka_s_backoff_inside_spark_s_attempts(
    monkeypatch, caplog
):
    """A driver lookup whose client call meets Kafka-retriable errors: the client's own
    loop makes one attempt each time, and the lookup's one loop retries them at Kafka's
    backoff within request.timeout.ms; only the request's timeout counts against Spark's
    fetchOffset.numRetries (3 attempts, 1000 ms apart): so the waits are the client's
    backoffs, one interval, the backoffs again... and the lookup ends after 3 attempts
    naming them, not 3 x (a nested loop's attempts)."""
    import logging

    from kafka_common.retries import with_retries
    from protocol.client.cluster import KafkaClient

    clock = FakeClock(monkeypatch)
    client = KafkaClient(
        bootstrap_servers="127.0.0.1:1",
        retry_backoff_ms=100,
        retry_backoff_max_ms=400,
        request_timeout_ms=1_000,
    )
    monkeypatch.setattr("protocol.retry.random.uniform", lambda a, b: 1.0)  # no jitter
    calls = []

    def lookup():
        calls.append(clock.now)
        return client.retrying("ListOffsets", lambda: (_ for _ in ()).throw(NotLeaderOrFollower()))

    with caplog.at_level(logging.WARNING, logger="test.lookup"):
        with pytest.raises(KafkaTimeoutError) as info:
            with_retries(
                "fetching offsets",
                lookup,
                config=client.config,
                log=logging.getLogger("test.lookup"),
            )
    # per attempt: waits of 100, 200, 400 ms (the next, 400, would end past 1,000 ms)
    backoffs = [100, 200, 400]
    assert clock.waits == backoffs + [1000] + backoffs + [1000] + backoffs, clock.waits
    assert len(calls) == 3 * (len(backoffs) + 1)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("fetching offsets failed (attempt" in m for m in warned)
    assert "gave up after 3 attempts" in str(info.value), info.value
    # each attempt's end is the request's own timeout, named as its loop names it
    assert str(info.value).startswith("ListOffsets did not succeed within 1000 ms"), info.value
    assert "NOT_LEADER_OR_FOLLOWER" in str(info.value)


def test_outside_a_lookup_the_client_loop_retries_on_its_own(monkeypatch):
    """The same client call outside a driver lookup: its own loop, Kafka's backoff until
    request.timeout.ms, then the timeout naming the request."""
    from protocol.client.cluster import KafkaClient

    clock = FakeClock(monkeypatch)
    monkeypatch.setattr("protocol.retry.random.uniform", lambda a, b: 1.0)
    client = KafkaClient(
        bootstrap_servers="127.0.0.1:1",
        retry_backoff_ms=100,
        retry_backoff_max_ms=400,
        request_timeout_ms=1_000,
    )
    monkeypatch.setattr(client, "refresh_in_use", lambda deadline=None: None)
    with pytest.raises(KafkaTimeoutError) as info:
        client.retrying("ListOffsets", lambda: (_ for _ in ()).throw(NotLeaderOrFollower()))
    assert clock.waits == [100, 200, 400]
    assert str(info.value).startswith("ListOffsets did not succeed within 1000 ms")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_registry_s_calls_wait_as_the_policy_says(monkeypatch):
    """A Schema Registry nobody answers at: the REST call's one loop waits 100 ms doubling
    up to 1.6 s, while the next wait still ends within schema.registry.timeout.ms (5 s),
    then says what it waited for; every wait is the policy's (the fake clock counts them)."""
    from kafka_common.option_map import OptionMap
    from kafka_common.schema_registry import RegistryClient, RegistryError, registry_settings

    client = RegistryClient(
        registry_settings(
            OptionMap(
                {
                    "schema.registry.url": f"http://127.0.0.1:{_closed_port()}",
                    "schema.registry.timeout.ms": "5000",
                }
            )
        )
    )
    clock = FakeClock(monkeypatch)
    monkeypatch.setattr("protocol.retry.random.uniform", lambda a, b: 1.0)
    with pytest.raises(RegistryError) as info:
        client.schema_by_id(1)
    assert clock.waits == [100, 200, 400, 800, 1600, 1600]
    assert "within schema.registry.timeout.ms=5000 (gave up after 7 attempts" in str(info.value)


def test_a_token_endpoint_is_asked_as_the_policy_says(monkeypatch):
    """A token endpoint nobody answers at: the waits double from
    sasl.login.retry.backoff.ms while their sum stays within sasl.login.retry.backoff.max.ms
    (Kafka's login retries), then the sign-in fails naming both options."""
    from kafka_common.oauth.sources import ClientCredentials
    from kafka_common.trust import URLS_ENV
    from protocol.config import Secret

    endpoint = f"http://127.0.0.1:{_closed_port()}/token"
    monkeypatch.setenv(URLS_ENV, endpoint)
    source = ClientCredentials(
        endpoint, "id", Secret("s"), retry_backoff_ms=100, retry_backoff_max_ms=1000
    )
    clock = FakeClock(monkeypatch)
    with pytest.raises(AuthenticationError) as info:
        source.fetch()
    assert clock.waits == [100, 200, 400]
    assert "could not be reached after 4 attempts" in str(info.value)
    assert "kafka.sasl.login.retry.backoff.max.ms" in str(info.value)
