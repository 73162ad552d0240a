"""An MIT Kerberos realm for tests: a KDC of its own in a temporary directory.

:class:`KerberosRealm` makes a realm with MIT's tools (``kdb5_util create -s``,
``kadmin.local addprinc`` / ``ktadd``), starts ``krb5kdc -n`` on a free port of loopback and
writes a ``krb5.conf`` naming it, for both sides: the broker JVM reads it through
``-Djava.security.krb5.conf`` (:attr:`KerberosRealm.jvm_args`), a client through
``KRB5_CONFIG`` (:meth:`KerberosRealm.client_env`)::

    with KerberosRealm() as realm:
        realm.add_principal("alice", keytab=True)          # alice@PYKAFKA.TEST, alice.keytab
        with KafkaCluster(kerberos=realm) as kafka:         # a GSSAPI listener
            kafka.listener("GSSAPI")                         # "localhost:port"

The broker's service principal is ``kafka/localhost`` (:attr:`KerberosRealm.broker_principal`,
its keys in :attr:`KerberosRealm.broker_keytab`); the GSSAPI listener is advertised as
``localhost``, so clients ask for that principal. ``dns_canonicalize_hostname`` and ``rdns``
are off: the host name a client connects to is the one in the principal.

``KerberosRealm(time_offset="+10m")`` runs the KDC under libfaketime (``faketime``), its clock
that far from this host's, to provoke clock skew for real; ``kdc_timesync=False`` writes
``kdc_timesync = 0`` into the clients' krb5.conf (by default MIT's library takes the KDC's
time from its first answer and corrects its own by it, so only a client with the setting off
meets the KDC's refusal).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .broker_node import die_with_parent, free_ports

__all__ = ["KerberosRealm", "KerberosStartError", "kerberos_tools_missing"]

REALM = "PYKAFKA.TEST"
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
_KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_FAKETIME = "faketime"  # the Debian package faketime (libfaketime's wrapper)


class KerberosStartError(RuntimeError):
    """The realm could not be made or the KDC did not start; the message says why."""


def _tool(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *_SBIN]))


def kerberos_tools_missing() -> list[str]:
    """The MIT Kerberos programs this module needs that are not installed
    (``scripts/ensure_kerberos.sh`` installs them)."""
    return [name for name in _TOOLS if _tool(name) is None]


class KerberosRealm:
    """A realm ``realm`` with a KDC on loopback; ``ticket_lifetime`` is the realm's
    longest ticket (a principal's own ``max_life`` may be shorter); ``time_offset``
    (libfaketime's ``-f`` form, e.g. ``"+10m"``) moves the KDC's clock;
    ``kdc_timesync=False`` stops clients correcting their clock by the KDC's."""

    def __init__(
        self,
        realm: str = REALM,
        *,
        ticket_lifetime: str = "1h",
        time_offset: str | None = None,
        kdc_timesync: bool = True,
    ) -> None:
        missing = kerberos_tools_missing()
        if time_offset is not None and _tool(_FAKETIME) is None:
            missing.append(_FAKETIME)
        if missing:
            raise KerberosStartError(
                f"MIT Kerberos is not installed ({', '.join(missing)} missing): "
                "run scripts/ensure_kerberos.sh"
            )
        self.realm = realm
        self.ticket_lifetime = ticket_lifetime
        self.time_offset = time_offset
        self.kdc_timesync = kdc_timesync
        self.dir = Path(tempfile.mkdtemp(prefix="krb5-realm-"))
        self.port = 0
        self._kdc: subprocess.Popen | None = None

    def __enter__(self) -> KerberosRealm:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- files ----------------------------------------------------------------------------

    @property
    def krb5_conf(self) -> Path:
        return self.dir / "krb5.conf"

    @property
    def broker_principal(self) -> str:
        return f"kafka/localhost@{self.realm}"

    @property
    def broker_keytab(self) -> Path:
        return self.dir / "kafka.keytab"

    @property
    def jvm_args(self) -> list[str]:
        """The broker JVM's Kerberos settings: this realm's krb5.conf."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def broker_props(self, listener: str) -> dict[str, str]:
        """GSSAPI on ``listener`` (lower case) of a broker signing in as
        :attr:`broker_principal` with :attr:`broker_keytab`."""
        prefix = f"listener.name.{listener}"
        return {
            f"{prefix}.sasl.enabled.mechanisms": "GSSAPI",
            f"{prefix}.sasl.kerberos.service.name": "kafka",
            f"{prefix}.gssapi.sasl.jaas.config": (
                f"{_KRB5_MODULE} required useKeyTab=true storeKey=true "
                f'keyTab="{self.broker_keytab}" principal="{self.broker_principal}";'
            ),
        }

    def client_env(self, ccache: str | Path | None = None) -> dict[str, str]:
        """Environment variables for a client of this realm: ``KRB5_CONFIG`` and, given
        ``ccache``, ``KRB5CCNAME`` (a ``FILE:`` cache)."""
        env = {"KRB5_CONFIG": str(self.krb5_conf)}
        if ccache is not None:
            env["KRB5CCNAME"] = f"FILE:{ccache}"
        return env

    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def keytab(self, name: str) -> Path:
        return self.dir / (name.replace("/", "_").split("@")[0] + ".keytab")

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> KerberosRealm:
        try:
            self.port = free_ports(1)[0]
            self._write_config()
            self._run(_tool("kdb5_util"), "create", "-s", "-r", self.realm, "-P", "master-key")
            self.add_principal("kafka/localhost", keytab=True)
            self.broker_keytab.write_bytes(self.keytab("kafka/localhost").read_bytes())
            self._start_kdc()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._kdc is not None:
            self._kdc.terminate()
            try:
                self._kdc.wait(10)
            except subprocess.TimeoutExpired:
                self._kdc.kill()
                self._kdc.wait()
            self._kdc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- principals -----------------------------------------------------------------------

    def add_principal(
        self, name: str, *, keytab: bool = False, password: str | None = None, max_life=None
    ) -> str:
        """Add ``name`` (with a random key, or ``password``); ``keytab=True`` exports its
        keys to :meth:`keytab`; ``max_life`` (e.g. ``"30s"``) bounds its tickets."""
        principal = self.principal(name)
        args = ["addprinc", "-pw", password] if password else ["addprinc", "-randkey"]
        if max_life:
            args += ["-maxlife", str(max_life)]
        self.kadmin(*args, principal)
        if keytab:
            self.kadmin("ktadd", "-k", str(self.keytab(name)), principal)
        return principal

    def rekey(self, name: str) -> None:
        """New random keys for ``name``: a keytab exported before holds stale ones."""
        self.kadmin("cpw", "-randkey", self.principal(name))

    def kadmin(self, *args: str) -> str:
        """``kadmin.local -q`` with ``args`` on this realm's database."""
        query = " ".join(args)
        return self._run(_tool("kadmin.local"), "-r", self.realm, "-q", query)

    def kinit(self, name: str, ccache: str | Path) -> None:
        """``kinit -k -t <keytab>``: a ticket for ``name`` into the file ``ccache``."""
        env = {**os.environ, **self.client_env(ccache)}
        self._run(_tool("kinit"), "-k", "-t", str(self.keytab(name)), self.principal(name), env=env)

    # ---- internals ------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.dir / "kdc.conf"),
        }

    def _run(self, tool: str | None, *args: str, env: dict[str, str] | None = None) -> str:
        assert tool is not None  # kerberos_tools_missing() was checked
        run = subprocess.run(
            [tool, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env or self._env(),
            stdin=subprocess.DEVNULL,
        )
        if run.returncode != 0:
            raise KerberosStartError(
                f"{Path(tool).name} {args[0]} failed ({run.returncode}): "
                f"{(run.stdout + run.stderr)[-2000:]}"
            )
        return run.stdout

    def _write_config(self) -> None:
        timesync = "" if self.kdc_timesync else "  kdc_timesync = 0\n"
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_kdc = false\n"
            "  dns_lookup_realm = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  rdns = false\n"
            "  udp_preference_limit = 1\n"
            f"  ticket_lifetime = {self.ticket_lifetime}\n"
            "  forwardable = true\n"
            f"{timesync}"
            "[realms]\n"
            f"  {self.realm} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {self.realm}\n"
        )
        (self.dir / "kdc.conf").write_text(
            "[kdcdefaults]\n"
            f"  kdc_ports = {self.port}\n"
            f"  kdc_tcp_ports = {self.port}\n"
            "[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {self.dir / 'principal'}\n"
            f"    key_stash_file = {self.dir / 'stash'}\n"
            f"    acl_file = {self.dir / 'kadm5.acl'}\n"
            f"    max_life = {self.ticket_lifetime}\n"
            "    max_renewable_life = 0\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self.dir / 'kdc.log'}\n"
        )
        (self.dir / "kadm5.acl").write_text("")

    def _start_kdc(self) -> None:
        out = open(self.dir / "kdc.stdout", "ab")
        faked = [_tool(_FAKETIME) or _FAKETIME, "-f", self.time_offset] if self.time_offset else []
        self._kdc = subprocess.Popen(
            [*faked, _tool("krb5kdc") or "krb5kdc", "-n", "-r", self.realm],
            env=self._env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        out.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._kdc.poll() is not None:
                raise KerberosStartError(f"krb5kdc exited ({self._kdc.returncode}): {self._log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise KerberosStartError(f"krb5kdc did not listen on port {self.port}: {self._log()}")

    def _log(self) -> str:
        parts = []
        for name in ("kdc.stdout", "kdc.log"):
            path = self.dir / name
            if path.exists():
                parts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(parts)
