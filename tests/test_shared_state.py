"""Objects shared by several users keep no state one user writes for its own call.

A task's range readers share one client (from the worker's pool, with its config and
connections): each reader's poll deadline travels with its calls (``deadline=``), never as
an attribute of the client or of its config, so that one reader's deadline cannot cut
another's call. Checked on the source, and with a broker that falls silent.
"""

from __future__ import annotations

import ast
import os
import time

import pytest

from protocol.client.cluster import KafkaClient
from protocol.config import ClientConfig
from protocol.errors import KafkaConnectionError, KafkaTimeoutError

from .helpers.library import ROOT, library_sources

#: The names under which a module holds a shared object: a client, its config, a broker
#: connection, a range reader.
SHARED = {"client", "config", "client_config", "conn", "connection", "reader"}


def _written_attributes(tree: ast.AST):
    """``(line, "owner.attribute")`` of every assignment to an attribute of an object
    held under a name of ``SHARED`` (``x.client.deadline = ...``, ``config.y += ...``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        stack = list(targets)
        while stack:
            target = stack.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                stack.extend(target.elts)
                continue
            if not isinstance(target, ast.Attribute):
                continue
            owner = target.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name.lstrip("_") in SHARED:
                yield node.lineno, f"{name}.{target.attr}"


def test_no_module_writes_the_state_of_a_shared_client_config_or_reader():
    """The client's users (every package above ``protocol``) set no attribute of a client,
    a connection, a config or a range reader: ``protocol/client`` (the client, the pool)
    keeps its own, and readers are given what they need when they are made. (The
    sans-IO rest of ``protocol`` holds no client: ``test_layering``.)"""
    offenders = []
    for path in library_sources():
        rel = os.path.relpath(path, ROOT)
        if rel.startswith("protocol" + os.sep):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        offenders += [f"{rel}:{line}: {what}" for line, what in _written_attributes(tree)]
    assert not offenders, offenders


def test_the_check_sees_what_the_reader_used_to_write():
    """The check above catches the writes it is there for."""
    code = (
        "self.client.deadline = d\n"
        "self.config.request_timeout_ms = 5\n"
        "reader.pending = p\n"
        "a, self._client.x = 1, 2\n"
        "self.tries.count += 1\n"
    )
    assert [w for _, w in _written_attributes(ast.parse(code))] == [
        "client.deadline",
        "config.request_timeout_ms",
        "reader.pending",
        "_client.x",
    ]


def test_the_client_keeps_no_deadline():
    client = KafkaClient(bootstrap_servers="127.0.0.1:9")
    assert not hasattr(client, "deadline")


def test_one_caller_s_deadline_does_not_cut_another_s_call(proxy):  # noqa: F811
    """Two callers share a client (as a task's range readers do) and the broker falls
    silent: the first, its deadline 0.3 s away, gives up by then, not after the 4 s request
    timeout; the second, its deadline 20 s away, still waits the whole request timeout (on
    a new connection: the first's was closed), not cut short by the first's deadline."""
    request_ms = 4000
    config = ClientConfig(bootstrap_servers=[proxy.address], request_timeout_ms=request_ms)
    with KafkaClient(config) as client:
        client.refresh_in_use()  # connected, the cluster known
        proxy.stall()
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            client.refresh_in_use(deadline=time.monotonic() + 0.3)
        first = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises((KafkaTimeoutError, KafkaConnectionError)):
            client.refresh_in_use(deadline=time.monotonic() + 20)
        second = time.monotonic() - started
    assert first < request_ms / 1000 / 2, f"the first call took {first:.2f} s"
    assert second >= request_ms / 1000 * 0.9, f"the second call took {second:.2f} s"
