"""Parse software version facts: kernel, OS, OFED, the NCCL libraries, header, config and env."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

# re.ASCII where numbers are read: a str pattern's \d also matches other scripts' digits.
_KERNEL_RELEASE = re.compile(r"\d+\.\d+[0-9A-Za-z._+~-]*", re.ASCII)  # "5.15.0-112-generic"
_OS_RELEASE_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.ASCII)
# `ofed_info -s` prints "<package>-<version>:"; MLNX_OFED says MLNX_OFED_LINUX, DOCA-OFED and
# builds from the source tarball say OFED-internal
_OFED = re.compile(r"([A-Za-z][A-Za-z_]*(?:-[A-Za-z][A-Za-z_]*)*-\d+\.\d+-\d+(?:\.\d+)*):?", re.ASCII)
# what a shell says when ofed_info is not installed (bash, dash, and `command -v` wrappers' sh)
_NOT_FOUND = re.compile(r"(?:.*: )?ofed_info: (?:command )?not found")
# one ldconfig -p entry, with the probe's " -> <readlink -f target>" appended when it resolves
_LDCONFIG = re.compile(r"(?P<soname>\S+) \((?P<flags>[^)]*)\) => (?P<path>\S+)(?: -> (?P<target>\S+))?")
_LDCONFIG_HEADER = re.compile(r"\d+ libs found in cache `[^']*'", re.ASCII)
_VERSIONED_NCCL = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)", re.ASCII)
# anchored at a line's start, as a directive is: unanchored, findall tried the leading [ \t]* from
# every position of a line of spaces, quadratic (1 MB of spaces did not finish in 400 s)
_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(NCCL_MAJOR|NCCL_MINOR|NCCL_PATCH|NCCL_VERSION_CODE)"
    r"[ \t]+(\S+)",
    re.ASCII | re.MULTILINE,
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


@dataclass(frozen=True)
class OsRelease:
    id: str  # "ubuntu", "rocky"
    version_id: str | None  # "22.04"; rolling releases (Arch, sid) have none
    pretty_name: str  # PRETTY_NAME, else "NAME VERSION"


@dataclass(frozen=True)
class NcclLib:
    soname: str  # "libnccl.so.2", "libnccl-net.so"
    arch: str  # ldconfig's flags as printed: "libc6,x86-64"
    path: str  # the cache entry: "/usr/lib/x86_64-linux-gnu/libnccl.so.2"
    target: str | None  # readlink -f of path; None when the probe printed none


@dataclass(frozen=True)
class NcclLibs:
    libs: tuple[NcclLib, ...]  # every libnccl* entry, in cache order
    version: str | None  # of the first 64-bit libnccl.so.2 with a versioned target
    net_plugins: tuple[str, ...]  # sonames of libnccl-net*.so entries
    conflicting: tuple[str, ...]  # the distinct versions when the cache resolves to several


def parse_uname_r(text: str) -> str:
    """`uname -r`: "5.15.0-112-generic"."""
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError("uname -r", "empty output", text)
    if len(lines) > 1 or not _KERNEL_RELEASE.fullmatch(lines[0]):
        raise ParseError("uname -r", f"not a kernel release: {quote(text.strip())}", text)
    return lines[0]


def parse_os_release(text: str) -> OsRelease:
    """/etc/os-release (os-release(5): shell-style KEY=value, values quoted or not, '#' comments)."""
    tool = "os-release"
    fields: dict[str, str] = {}
    for line in split_lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _OS_RELEASE_LINE.fullmatch(stripped)
        if not match:
            raise ParseError(tool, f"not a KEY=value line: {quote(stripped)}", text)
        fields[match[1]] = _unquote(match[2], tool, text)
    if not fields:
        raise ParseError(tool, "empty output", text)
    # os-release(5) lets ID default to "linux"; a file without ID is more likely not os-release at all
    if not fields.get("ID"):
        raise ParseError(tool, "no ID line", text)
    pretty = fields.get("PRETTY_NAME") or " ".join(
        value for value in (fields.get("NAME"), fields.get("VERSION")) if value
    )
    if not pretty:
        raise ParseError(tool, "no PRETTY_NAME and no NAME line", text)
    return OsRelease(fields["ID"], fields.get("VERSION_ID") or None, pretty)


def parse_ofed_info(text: str) -> str | None:
    """`ofed_info -s`: "MLNX_OFED_LINUX-23.10-1.1.9.0"; None for no output or "ofed_info: not found"."""
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if not lines or all(_NOT_FOUND.fullmatch(line) for line in lines):
        return None  # inbox rdma-core: there is no OFED package to name
    match = _OFED.fullmatch(lines[0])
    if len(lines) > 1 or not match:
        raise ParseError("ofed_info -s", f"not '<package>-<version>:': {quote(text.strip())}", text)
    return match[1]


def parse_ldconfig_nccl(text: str) -> NcclLibs:
    """libnccl* entries of `ldconfig -p` (others skipped), each optionally with " -> <resolved target>"."""
    libs = []
    for line in split_lines(text):
        stripped = line.strip()
        if not stripped or _LDCONFIG_HEADER.fullmatch(stripped):
            continue
        match = _LDCONFIG.fullmatch(stripped)
        if not match:
            raise ParseError("ldconfig -p", f"not an ldconfig entry: {quote(stripped)}", text)
        if match["soname"].startswith("libnccl"):
            libs.append(NcclLib(match["soname"], match["flags"], match["path"], match["target"]))
    plugins = [lib for lib in libs if lib.soname.startswith("libnccl-net")]
    cores = [lib for lib in libs if lib not in plugins]
    # versions come from the resolved file name; pip wheels ship an unversioned libnccl.so.2
    # (vllm#3661), which names no version and so adds none
    versions = list(dict.fromkeys(v for v in (_target_version(lib) for lib in cores) if v))
    primary = [lib for lib in cores if lib.soname == "libnccl.so.2" and is_64bit(lib.arch)]
    # the dynamic loader takes the first cache entry for a soname, so the first one is what runs
    version = next((v for v in (_target_version(lib) for lib in primary) if v), None)
    return NcclLibs(
        tuple(libs),
        version,
        tuple(dict.fromkeys(lib.soname for lib in plugins)),
        tuple(versions) if len(versions) > 1 else (),
    )


def parse_nccl_header(text: str) -> str | None:
    """ "2.23.4" from nccl.h's NCCL_MAJOR/MINOR/PATCH or NCCL_VERSION_CODE; None for no header."""
    tool = "nccl.h"
    if not text.strip():
        return None  # runtime-only nodes have no nccl.h: nothing to compare
    defines: dict[str, int] = {}
    for name, value in _DEFINE.findall(text):
        if not re.fullmatch(r"\d+", value, re.ASCII):  # "${nccl:Major}": the unrendered .in
            raise ParseError(tool, f"{name} is not a number: {quote(value)}", text)
        if defines.get(name, int(value)) != int(value):
            raise ParseError(tool, f"{name} defined twice with different values", text)
        defines[name] = int(value)
    parts = [defines.get(name) for name in ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")]
    code = defines.get("NCCL_VERSION_CODE")
    decoded = _decode_version_code(code) if code is not None else None
    if all(part is not None for part in parts):
        version = tuple(parts)
        if decoded is not None and decoded != version:
            raise ParseError(tool, f"NCCL_VERSION_CODE {code} disagrees with MAJOR/MINOR/PATCH", text)
    elif decoded is not None:
        version = decoded
    else:
        raise ParseError(tool, "no NCCL_MAJOR/MINOR/PATCH or NCCL_VERSION_CODE define", text)
    # NCCL_SUFFIX is left out: NCCL_DEBUG logs print the plain "2.23.4", and the two are compared
    return ".".join(str(part) for part in version)


def parse_nccl_conf(text: str) -> dict[str, str]:
    """/etc/nccl.conf or ~/.nccl.conf as NCCL reads it (src/misc/param.cc setEnvFile)."""
    tool = "nccl.conf"
    settings: dict[str, str] = {}
    for line in split_lines(text):  # a \r\n ending loses its \r, as NCCL strips it
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, equals, value = line.partition("=")
        # NCCL splits at the first '=' and keeps both sides verbatim: "NCCL_DEBUG = INFO" sets a
        # variable named "NCCL_DEBUG " that nothing reads, and a quoted value keeps its quotes;
        # a line without '=' is silently skipped. Neither is a setting a judge can rely on.
        if not equals or not _ENV_NAME.fullmatch(key):
            raise ParseError(tool, f"not a NAME=value line: {quote(line)}", text)
        if key in settings and settings[key] != value:
            # old NCCL keeps the first value (setenv overwrite=0); which one applies depends on version
            raise ParseError(tool, f"{key} set twice with different values", text)
        settings[key] = value
    return settings


def parse_nccl_env(text: str) -> dict[str, str]:
    """`env` output filtered to NCCL_* lines: {"NCCL_DEBUG": "INFO"}; {} when none is set."""
    settings: dict[str, str] = {}
    for line in split_lines(text):
        if not line.strip():
            continue
        key, equals, value = line.partition("=")
        if not equals or not key.startswith("NCCL_") or not _ENV_NAME.fullmatch(key):
            raise ParseError("env", f"not an NCCL_ variable line: {quote(line)}", text)
        settings[key] = value
    return settings


def _unquote(value: str, tool: str, text: str) -> str:
    """An os-release value: unquoted, or in "..." / '...' with shell backslash escapes."""
    if value[:1] in ("'", '"'):
        if len(value) < 2 or value[-1] != value[0]:
            raise ParseError(tool, f"unterminated quote: {quote(value)}", text)
        inner = value[1:-1]
        return re.sub(r"\\([\\$\"`])", r"\1", inner) if value[0] == '"' else inner
    return value


def _decode_version_code(code: int) -> tuple[int, int, int]:
    # nccl.h's NCCL_VERSION(X,Y,Z): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 (20900)
    if code >= 10000:
        return code // 10000, code % 10000 // 100, code % 100
    return code // 1000, code % 1000 // 100, code % 100


def _target_version(lib: NcclLib) -> str | None:
    if lib.target is None:
        return None
    match = _VERSIONED_NCCL.fullmatch(lib.target.rsplit("/", 1)[-1])
    return match[1] if match else None


def is_64bit(flags: str) -> bool:
    """Whether ldconfig's flags for a library ("libc6,x86-64") name a 64-bit one."""
    return any(word in flags.lower() for word in ("x86-64", "aarch64"))
