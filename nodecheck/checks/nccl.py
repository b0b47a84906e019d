"""The host's NCCL: the library the loader resolves and its settings, which must match across the
job's nodes (read from the versions probe). The nccl-tests runs are in nccl_allreduce.py, the job's
NCCL environment in nccl_env.py."""

from __future__ import annotations

from nodecheck.checks.values import value_check
from nodecheck.core.errors import ParseError
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import Absent, PinOrDrift
from nodecheck.parsers.versions import (
    is_64bit,
    parse_ldconfig_nccl,
    parse_nccl_conf,
    parse_nccl_env,
    parse_nccl_header,
)
from nodecheck.probes.versions import VERSIONS, ok_text, versions_sections


@value_check(
    "nccl.version",
    what="NCCL",
    probes=[VERSIONS],
    doc="The NCCL library the loader resolves (ldconfig cache → versioned file) is pinned "
    "and/or the same on every node.",
)
def version(out: Captures, _want: PinOrDrift) -> str:
    sections = versions_sections(out)
    libs = parse_ldconfig_nccl(ok_text(sections, "nccl-libs", "ldconfig -p"))
    if libs.conflicting:
        # two NCCLs in the cache: which one a job loads depends on its environment
        raise ParseError(
            "ldconfig -p",
            "several NCCL versions in the loader cache: " + ", ".join(libs.conflicting),
            "\n".join(str(lib) for lib in libs.libs),
        )
    if libs.version:
        return libs.version
    unversioned = [lib for lib in libs.libs if lib.soname == "libnccl.so.2" and is_64bit(lib.arch)]
    if unversioned:
        # the loader does find it (a pip wheel's single file, or a target readlink could not
        # resolve): the version is unknown, which is not the same as NCCL missing
        lib = unversioned[0]
        where = lib.path if lib.target in (None, lib.path) else f"{lib.path} -> {lib.target}"
        raise ParseError(
            "ldconfig -p",
            f"libnccl.so.2 is in the loader cache ({where}) but its file name carries no version",
            "\n".join(str(lib) for lib in libs.libs),
        )
    header = sections.get("nccl-header")
    header_version = parse_nccl_header(header.text) if header is not None and header.ok else None
    seen = f" (nccl.h says {header_version})" if header_version else ""
    raise Absent(
        f"no libnccl.so.2 in the loader cache (ldconfig -p){seen}: a job using the host's NCCL would fail to load it"
    )


def settings_value(out: Captures) -> str:
    """/etc/nccl.conf, NCCL_* environment and net plugins, as one comparable line."""
    sections = versions_sections(out)

    def text(name: str, tool: str) -> str:
        # absent (no /etc/nccl.conf) is empty; present but failed is unread, never "no settings"
        return ok_text(sections, name, tool) if sections.get(name) is not None else ""

    settings = dict(parse_nccl_conf(text("nccl-conf", "/etc/nccl.conf")))
    settings.update(parse_nccl_env(ok_text(sections, "nccl-env", "env")))  # the environment overrides
    plugins = parse_ldconfig_nccl(ok_text(sections, "nccl-libs", "ldconfig -p")).net_plugins
    parts = [f"{k}={v}" for k, v in sorted(settings.items())]
    parts.append("net plugin " + (", ".join(sorted(plugins)) if plugins else "none"))
    return "; ".join(parts)


@value_check(
    "nccl.settings",
    what="NCCL settings",
    probes=[VERSIONS],
    doc="NCCL settings (/etc/nccl.conf, NCCL_* environment, net plugin) are the same on every "
    "node: one node with another NCCL_IB_HCA or GID index can hang a collective.",
)
def settings(out: Captures, _want: PinOrDrift) -> str:
    return settings_value(out)
