"""The BrokerError subclasses: one per code of the guide's table, and one made up for a code
this client does not know."""

import pickle

from protocol import errors
from protocol.error_codes import ERROR_CODES
from protocol.errors import BrokerError


def test_one_class_per_code_named_after_it():
    for code, (name, retriable, message) in ERROR_CODES.items():
        if code == 0:
            continue
        err = BrokerError.for_code(code, topic="t", partition=3)
        cls = type(err)
        assert (cls.code, cls.name, cls.retriable, cls.description) == (
            code,
            name,
            retriable,
            message,
        )
        assert cls.__module__ == "protocol.errors" and getattr(errors, cls.__name__) is cls
        assert str(err) == f"[{name} ({code})] {message} (topic 't', partition 3)"
    assert type(BrokerError.for_code(6)).__name__ == "NotLeaderOrFollower"
    assert errors.error_class("NOT_LEADER_OR_FOLLOWER").code == 6
    err = pickle.loads(pickle.dumps(BrokerError.for_code(6, topic="t", partition=1)))
    assert isinstance(err, errors.NotLeaderOrFollower) and err.topic == "t"


def test_an_unknown_code_is_not_retriable_and_says_so():
    err = BrokerError.for_code(9999, "what the broker said", topic="t")
    assert type(err).__name__ == "UnknownError9999" and isinstance(err, BrokerError)
    assert (err.code, err.name, err.retriable) == (9999, "UNKNOWN_ERROR_9999", False)
    assert str(err) == "[UNKNOWN_ERROR_9999 (9999)] what the broker said (topic 't')"
    assert "does not know" in str(BrokerError.for_code(-7))
