"""The check that a secret never shows in an error, a log or a repr."""

from __future__ import annotations

import base64
import hashlib
import traceback


# RFC 7677, section 3: the SCRAM-SHA-256 example exchange.
RFC_USER, RFC_PASSWORD, RFC_NONCE = "user", "pencil", "rOprNGfwEbeRWgbNEkqO"


RFC_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="


RFC_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="


_RFC_SALTED = hashlib.pbkdf2_hmac("sha256", b"pencil", base64.b64decode(RFC_SALT), 4096)


#: Strings that must never appear in an error message or a repr.
SECRETS = [RFC_PASSWORD, RFC_PROOF, base64.b64encode(_RFC_SALTED).decode(), _RFC_SALTED.hex()]


def assert_no_secret(*objects: object, secrets: list[str] = SECRETS) -> None:
    """Neither the str nor the repr of an object, nor of any exception chained to it
    (``__cause__`` / ``__context__``), may mention a secret."""
    pending, seen = list(objects), []
    while pending:
        obj = pending.pop()
        seen.append(obj)
        if isinstance(obj, BaseException):
            pending.extend(e for e in (obj.__cause__, obj.__context__) if e is not None)
    for obj in seen:
        texts = [str(obj), repr(obj)]
        if isinstance(obj, BaseException):
            texts.append("".join(traceback.format_exception_only(obj)))
        for text in texts:
            for secret in secrets:
                assert secret not in text, f"secret leaked into {text!r}"
