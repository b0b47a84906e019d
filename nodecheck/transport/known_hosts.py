"""Judges a node's SSH host key against OpenSSH known_hosts files, and records keys trusted on first use."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import paramiko

REVOKED_MARKER = "@revoked"
CA_MARKER = "@cert-authority"
_HASHED = "|1|"  # OpenSSH's HashKnownHosts form: |1|base64 salt|base64 HMAC-SHA1


class Verdict(str, Enum):
    MATCH = "MATCH"  # a line under the deciding names lists the offered key
    MISMATCH = "MISMATCH"  # the deciding names are known, but with other keys only: never trust on first use
    REVOKED = "REVOKED"  # an @revoked line for the node lists the offered key
    UNKNOWN = "UNKNOWN"  # no line vouches for or against the node: trust on first use may apply


@dataclass(frozen=True)
class KeyCheck:
    verdict: Verdict
    detail: str  # for the operator: which names, which key, which file lines


def host_form(host: str, port: int = 22) -> str:
    """The name OpenSSH files a host under: bare for port 22, '[host]:port' otherwise."""
    host = host.lower()
    return host if port == 22 else f"[{host}]:{port}"


def node_names(name: str, address: str, port: int = 22) -> list[list[str]]:
    """names_by_priority for a node: its name is its identity; its address (which may be shared or
    reused) is consulted only when known_hosts says nothing about the name."""
    groups = [[host_form(name, port)]]
    if address.lower() != name.lower():
        groups.append([host_form(address, port)])
    return groups


@dataclass(frozen=True, eq=False)  # identity equality: two identical lines are two entries
class _Entry:
    marker: str | None  # None, REVOKED_MARKER or CA_MARKER
    matches: Callable[[str], bool]
    literals: tuple[str, ...] | None  # the names, when the hostnames field is plain names only
    key: paramiko.PKey | None  # None for @cert-authority: CA keys are never compared
    source: str  # "path:line"

    @property
    def host_key(self) -> paramiko.PKey:
        """The key of a plain or @revoked line: only @cert-authority lines hold none."""
        assert self.key is not None
        return self.key


class _Skip(Exception):
    """A line that cannot be used; the message says why."""


class KnownHosts:
    """Every usable line of the given known_hosts files (no first-wins); thread-safe.

    A malformed, unsupported or @cert-authority line is skipped and noted in `warnings`, never
    fatal: one bad line must not make every node unreachable."""

    def __init__(self, paths: list[str], writable: str | None = None) -> None:
        paths = [os.path.expanduser(p) for p in paths]
        self.writable = os.path.expanduser(writable) if writable else (paths[-1] if paths else None)
        if self.writable and self.writable not in paths:
            paths.append(self.writable)  # what add() appends to must be read, or it duplicates
        self.paths = paths
        self.warnings: list[str] = []
        self._lock = threading.Lock()
        self._exact: dict[str, list[_Entry]] = {}  # plain-name lines, indexed: clusters have many nodes
        self._scan: list[_Entry] = []  # hashed, wildcard and negated lines: tried one by one
        for p in paths:
            self._load(p)

    # -- queries ---------------------------------------------------------------------------------
    def check(self, names_by_priority: list[list[str]], key: paramiko.PKey) -> KeyCheck:
        """Judge `key` offered by a node known under `names_by_priority` (see node_names()).

        REVOKED if any @revoked line matching any of the names lists the key (checked first).
        Otherwise the first group with any plain line decides: MATCH if one of its lines has the
        key, else MISMATCH (also when it only lists other key types: the node is known, so this is
        no first use). UNKNOWN if no group has a plain line."""
        groups = [[n.lower() for n in g] for g in names_by_priority if g]
        everyone = [n for g in groups for n in g]
        who = everyone[0] if everyone else "?"
        offered = f"{key.get_name()} {key.fingerprint}"
        with self._lock:
            revoked = [e for e in self._lines(everyone, REVOKED_MARKER) if _same(e.key, key)]
            if revoked:
                return KeyCheck(
                    Verdict.REVOKED,
                    f"host key {offered} of {who} is marked @revoked ({_where(revoked)}); "
                    f"do not use this node until its host keys are replaced",
                )
            for i, group in enumerate(groups):
                if plain := self._lines(group, None):
                    via = "" if i == 0 else f" (nothing recorded under {who}, so judged by its address)"
                    return _judge(group[0] + via, plain, key, offered)
            cas = self._lines(everyone, CA_MARKER)
        if cas:
            return KeyCheck(
                Verdict.UNKNOWN,
                f"no host key recorded for {who}: only @cert-authority lines match "
                f"({_where(cas)}) and host certificates are not supported; "
                f"add the node's host key ({offered}) to known_hosts",
            )
        return KeyCheck(Verdict.UNKNOWN, f"no known_hosts entry for {' or '.join(everyone) or '?'} (offered {offered})")

    def key_types_for(self, names_by_priority: list[list[str]]) -> list[str]:
        """Host key algorithms to ask the server for, in paramiko's preference order: those of the
        keys recorded for the group check() would decide on; [] (leave paramiko's default) if none.

        Restricting negotiation to known types is what OpenSSH does too; it keeps a server from
        offering a type we cannot verify (check() calls that a MISMATCH)."""
        with self._lock:
            for group in names_by_priority:
                if plain := self._lines([n.lower() for n in group], None):
                    types = {e.host_key.get_name() for e in plain}
                    # paramiko's own preference order: a private list types-paramiko leaves out
                    preferred = paramiko.Transport._preferred_keys  # type: ignore[attr-defined]
                    return [alg for alg in preferred if _key_type(alg) in types]
        return []

    # -- trust on first use ----------------------------------------------------------------------
    def add(self, names: list[str], key: paramiko.PKey) -> bool:
        """Trust `key` for `names` (e.g. ["node3", "10.0.0.3"]; call after check() said UNKNOWN).

        Records it in memory, so later checks in this run see it, and appends ONE line listing
        the names that lack an equal line to the writable file (directory created if needed).
        Returns False, writing nothing, if every name already has this key. A failed write is
        noted in `warnings`: the key is then trusted for this run only."""
        with self._lock:
            new = [
                n
                for n in dict.fromkeys(x.lower() for x in names)
                if not any(_same(e.key, key) for e in self._lines([n], None))
            ]
            if not new:
                return False
            text = f"{','.join(new)} {key.get_name()} {key.get_base64()}"
            self._index(_parse(text, f"{self.writable or 'memory'} (added this run)"))
            if self.writable:
                self._append(text)
            return True

    # -- internals (callers hold the lock, except during __init__) --------------------------------
    def _load(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")  # a stray byte spoils one line, not the file
        except FileNotFoundError:
            return
        except OSError as e:
            self.warnings.append(f"{path}: cannot read ({e.strerror or e}), treated as empty")
            return
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                entry = _parse(line, f"{path}:{n}")
            except _Skip as e:
                self.warnings.append(f"{path}:{n}: {e}, ignored")
                continue
            if entry.marker == CA_MARKER:  # kept, so check() can say why the node is unknown
                self.warnings.append(f"{path}:{n}: @cert-authority ignored (host certificates are not supported)")
            self._index(entry)

    def _index(self, entry: _Entry) -> None:
        if entry.literals is None:
            self._scan.append(entry)
        for name in entry.literals or ():
            self._exact.setdefault(name, []).append(entry)

    def _lines(self, names: list[str], marker: str | None) -> list[_Entry]:
        found = [e for n in names for e in self._exact.get(n, ())]
        found += [e for e in self._scan if any(e.matches(n) for n in names)]
        return [e for e in dict.fromkeys(found) if e.marker == marker]

    def _append(self, text: str) -> None:
        path = self.writable
        assert path is not None  # add() appends only when there is a writable file
        try:
            os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
            with open(path, "ab+") as f:
                f.seek(0, os.SEEK_END)
                if f.tell():  # a last line without its newline would swallow ours
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        text = "\n" + text
                f.write(f"{text}\n".encode())
        except OSError as e:
            self.warnings.append(f"{path}: cannot append host key ({e.strerror or e}); trusted for this run only")


def _judge(who: str, plain: list[_Entry], key: paramiko.PKey, offered: str) -> KeyCheck:
    if hit := [e for e in plain if _same(e.key, key)]:
        return KeyCheck(Verdict.MATCH, f"{offered} for {who} matches {_where(hit[:1])}")
    same_type = [e for e in plain if e.host_key.get_name() == key.get_name()]
    if same_type:
        return KeyCheck(
            Verdict.MISMATCH,
            f"host key MISMATCH for {who}: offered {offered}, known_hosts has a different "
            f"{key.get_name()} key ({_where(same_type)}): reinstalled node or "
            f"man-in-the-middle; verify it, then update known_hosts",
        )
    types = ", ".join(sorted({e.host_key.get_name() for e in plain}))
    return KeyCheck(
        Verdict.MISMATCH,
        f"host key type {key.get_name()} for {who} is not in known_hosts, which lists only "
        f"{types} ({_where(plain)}); offered {offered}: verify it, then add it",
    )


def _parse(line: str, source: str) -> _Entry:
    """One known_hosts line: [marker] hostnames keytype base64-key [comment]."""
    fields = line.split()
    marker = fields.pop(0) if fields and fields[0].startswith("@") else None
    if marker not in (None, REVOKED_MARKER, CA_MARKER) or len(fields) < 3:
        raise _Skip("cannot parse")
    hosts, keytype, data = fields[:3]
    try:
        matches, literals = _hosts(hosts)
        blob = base64.b64decode(data, validate=True)
    except ValueError:  # binascii.Error is a ValueError
        raise _Skip("cannot parse") from None
    if marker == CA_MARKER:
        return _Entry(marker, matches, literals, None, source)
    try:
        key = paramiko.PKey.from_type_string(keytype, blob)
    except paramiko.pkey.UnknownKeyType:  # (paramiko.UnknownKeyType; the stubs export it only here)
        raise _Skip(f"unsupported key type {keytype}") from None
    except Exception:  # paramiko's key parsers fail on a corrupt blob in many ways
        raise _Skip("cannot parse") from None
    return _Entry(marker, matches, literals, key, source)


def _hosts(field: str) -> tuple[Callable[[str], bool], tuple[str, ...] | None]:
    """OpenSSH's hostnames field: a line matches a name if some item matches it and no '!item'
    does. Also returns the plain names when there is nothing but plain names, for indexing."""
    items = [i for i in field.split(",") if i]
    positive = [_pattern(i) for i in items if not i.startswith("!")]
    negative = [_pattern(i[1:]) for i in items if i.startswith("!")]
    if not positive and not negative:
        raise ValueError("no host names")
    plain = all(not i.startswith(("!", _HASHED)) and "*" not in i and "?" not in i for i in items)
    literals = tuple(i.lower() for i in items) if plain else None
    return (lambda name: any(p(name) for p in positive) and not any(p(name) for p in negative)), literals


def _pattern(item: str) -> Callable[[str], bool]:
    if item.startswith(_HASHED):  # names are hashed lowercased, as OpenSSH looks them up
        parts = item.split("|")
        if len(parts) != 4:
            raise ValueError("bad hashed host")
        salt, digest = base64.b64decode(parts[2], validate=True), base64.b64decode(parts[3], validate=True)
        if len(salt) != hashlib.sha1().digest_size:
            raise ValueError("bad salt")
        return lambda name: hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)
    item = item.lower()
    if "*" in item or "?" in item:  # only * and ? are special; '[' in '[host]:port' is literal
        rx = re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in item))
        return lambda name: rx.fullmatch(name) is not None
    return lambda name: name == item


def _same(recorded: paramiko.PKey | None, offered: paramiko.PKey) -> bool:
    return (
        recorded is not None and recorded.get_name() == offered.get_name() and recorded.asbytes() == offered.asbytes()
    )


def _key_type(alg: str) -> str:
    """The key type behind a host key algorithm: RSA keys are negotiated as rsa-sha2-*."""
    return "ssh-rsa" if alg.startswith("rsa-sha2-") else alg


def _where(entries: list[_Entry]) -> str:
    return ", ".join(e.source for e in entries)
