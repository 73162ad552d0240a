"""The AWS_MSK_IAM test credentials and the check of a signed payload."""

from __future__ import annotations

import datetime as dt
import urllib.parse
import pytest

botocore = pytest.importorskip("botocore")
from botocore.auth import SigV4QueryAuth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

KEY, SECRET, SESSION = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "FQoG/Zx+tok=="


def botocore_presign(url: str, region: str, when: dt.datetime, token: bool) -> AWSRequest:
    """botocore's presigned request (its own clock frozen at ``when``), as AWS's Python
    MSK signer makes it."""
    auth = SigV4QueryAuth(
        Credentials(KEY, SECRET, SESSION if token else None), "kafka-cluster", region, expires=900
    )
    request = AWSRequest(method="GET", url=url, params={"Action": "kafka-cluster:Connect"})
    original = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda: when.replace(tzinfo=None)
    try:
        auth.add_auth(request)
    finally:
        botocore.auth.get_current_datetime = original
    return request


def check_msk_payload(payload: dict, _extensions=None) -> dict | None:
    """The broker's side of AWS_MSK_IAM: recompute the signature from the payload's own
    date and the secret the broker knows."""
    when = dt.datetime.strptime(payload["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(
        tzinfo=dt.timezone.utc
    )
    region = payload["x-amz-credential"].split("/")[2]
    request = botocore_presign(
        f"https://{payload['host']}/", region, when, "x-amz-security-token" in payload
    )
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
    if payload["x-amz-signature"] != query["X-Amz-Signature"]:
        return {"status": "Access denied: signature mismatch"}
    return None
