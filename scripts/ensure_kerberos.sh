#!/bin/sh
# What make test-security's Kerberos tests need, installed where it is missing (once):
# MIT Kerberos' KDC and tools (krb5kdc, kdb5_util, kadmin.local, kinit) and its development
# files (krb5-config, which the gssapi package's build needs) and faketime (the clock skew
# test runs a KDC under it), with apt-get; then the
# `kerberos` extra (gssapi, built from its sdist; pip caches the wheel) into the venv whose
# Python is $1 (default .venv/bin/python).
set -eu
PY=${1:-.venv/bin/python}
HERE=$(cd "$(dirname "$0")/.." && pwd)

missing=""
for tool in krb5kdc kdb5_util kadmin.local kinit krb5-config faketime; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    echo "== installing MIT Kerberos (missing:$missing)"
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        krb5-kdc krb5-admin-server krb5-user libkrb5-dev faketime
fi

if ! "$PY" -c "import gssapi" >/dev/null 2>&1; then
    echo "== installing the kerberos extra (gssapi) into $(dirname "$PY")"
    # the extra's requirements as pyproject.toml pins them (not the project: it is installed)
    "$PY" -c "import sys, tomllib; print(chr(10).join(tomllib.load(open(sys.argv[1], 'rb'))['project']['optional-dependencies']['kerberos']))" "$HERE/pyproject.toml" >"${TMPDIR:-/tmp}/pykafka-kerberos-reqs.txt"
    "$PY" -m pip install -q -r "${TMPDIR:-/tmp}/pykafka-kerberos-reqs.txt"
fi
