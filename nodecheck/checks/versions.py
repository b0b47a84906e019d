"""Software versions that must match across the job's nodes: kernel, OS, OFED, NCCL, HCA firmware.

One probe gathers them all in one round trip (each command in its own section with its exit
code); each check reads its value from that, and crossnode pins it or compares it across nodes.
"""
from __future__ import annotations

import functools

from nodecheck.checks.ib import IBSTAT
from nodecheck.checks.values import value_check
from nodecheck.judging.drift import Absent, PinOrDrift
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.parsers.ibstat import parse_ibstat
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.parsers.versions import (_is_64bit, parse_ldconfig_nccl, parse_nccl_conf, parse_nccl_env,
                                        parse_nccl_header, parse_ofed_info, parse_os_release,
                                        parse_uname_r)
from nodecheck.core.registry import Captures

# Each command's output between markers (see parsers/sections.py). No value from the playbook
# reaches this script: it is the same fixed text on every node.
VERSIONS_SCRIPT = r"""
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; echo "@@nodecheck end $n rc=$?"; }
ldc=ldconfig; command -v ldconfig >/dev/null 2>&1 || ldc=/sbin/ldconfig
nccl_libs() {
  # the versioned file each cached soname resolves to is the NCCL the loader would really use
  "$ldc" -p | while IFS= read -r line; do
    case $line in
      *libnccl*) path=${line##*=> }
                 if target=$(readlink -f -- "$path" 2>/dev/null); then echo "$line -> $target"; else echo "$line"; fi ;;
    esac
  done
}
nccl_header() {
  for h in /usr/include/nccl.h /usr/local/cuda/include/nccl.h /usr/local/include/nccl.h; do
    if [ -r "$h" ]; then echo "@@nodecheck nccl-header-path $h"; grep -E '^#define NCCL_(MAJOR|MINOR|PATCH|SUFFIX|VERSION_CODE)' "$h"; return 0; fi
  done
  return 1
}
rdma_core() {
  dpkg-query -W -f '${Version}\n' rdma-core 2>/dev/null || rpm -q --qf '%{VERSION}-%{RELEASE}\n' rdma-core 2>/dev/null
}
section kernel uname -r
section os-release cat /etc/os-release
if command -v ofed_info >/dev/null 2>&1; then section ofed ofed_info -s; fi
section rdma-core rdma_core
section nccl-libs nccl_libs
section nccl-header nccl_header
if [ -r /etc/nccl.conf ]; then section nccl-conf cat /etc/nccl.conf; fi
section nccl-env sh -c 'env | grep "^NCCL_" || true'
exit 0
"""
VERSIONS = Probe("versions", ("sh", "-c", VERSIONS_SCRIPT, "nodecheck-versions"), timeout_s=20)


@functools.lru_cache(maxsize=65536)              # eight checks read each node's output: split it once
def _split(text: str) -> Sections:
    return split_sections(text, "versions probe")


def _sections(out: Captures) -> Sections:
    return _split(out[VERSIONS.name].stdout)


def _ok_text(sections: Sections, name: str, tool: str) -> str:
    section = sections.require(name, tool)
    if section.rc is None:
        raise ParseError(tool, "output cut off", section.text)
    if section.rc != 0:
        first = section.text.strip().splitlines()[:1]
        raise ParseError(tool, f"exited {section.rc}: {first[0] if first else 'no output'}", section.text)
    return section.text


@value_check("kernel.version", what="kernel", probes=[VERSIONS],
             doc="The running kernel (uname -r) is the pinned one and/or the same on every node.")
def kernel_version(out: Captures, _want: PinOrDrift) -> str:
    return parse_uname_r(_ok_text(_sections(out), "kernel", "uname -r"))


@value_check("os.release", what="OS", probes=[VERSIONS],
             doc="The OS release (/etc/os-release) is the pinned one and/or the same on every node.")
def os_release(out: Captures, _want: PinOrDrift) -> str:
    return parse_os_release(_ok_text(_sections(out), "os-release", "/etc/os-release")).pretty_name


@value_check("ofed.version", what="OFED", probes=[VERSIONS],
             doc="MLNX/DOCA OFED (ofed_info -s), else the rdma-core package, is pinned and/or the same "
                 "on every node.")
def ofed_version(out: Captures, _want: PinOrDrift) -> str:
    sections = _sections(out)
    ofed = sections.get("ofed")
    if ofed is not None and ofed.ok:
        value = parse_ofed_info(ofed.text)
        if value:
            return value
    rdma = sections.get("rdma-core")
    if rdma is not None and rdma.ok and rdma.text.strip():
        return f"rdma-core {rdma.text.strip().splitlines()[0]}"
    raise Absent("neither ofed_info nor an rdma-core package found (no RDMA userspace stack)")


@value_check("nccl.version", what="NCCL", probes=[VERSIONS],
             doc="The NCCL library the loader resolves (ldconfig cache → versioned file) is pinned "
                 "and/or the same on every node.")
def nccl_version(out: Captures, _want: PinOrDrift) -> str:
    sections = _sections(out)
    libs = parse_ldconfig_nccl(_ok_text(sections, "nccl-libs", "ldconfig -p"))
    if libs.conflicting:
        # two NCCLs in the cache: which one a job loads depends on its environment
        raise ParseError("ldconfig -p", "several NCCL versions in the loader cache: "
                         + ", ".join(libs.conflicting), "\n".join(str(lib) for lib in libs.libs))
    if libs.version:
        return libs.version
    unversioned = [lib for lib in libs.libs if lib.soname == "libnccl.so.2" and _is_64bit(lib.arch)]
    if unversioned:
        # the loader does find it (a pip wheel's single file, or a target readlink could not
        # resolve): the version is unknown, which is not the same as NCCL missing
        lib = unversioned[0]
        where = lib.path if lib.target in (None, lib.path) else f"{lib.path} -> {lib.target}"
        raise ParseError("ldconfig -p", f"libnccl.so.2 is in the loader cache ({where}) but its file name "
                         "carries no version", "\n".join(str(lib) for lib in libs.libs))
    header = sections.get("nccl-header")
    header_version = parse_nccl_header(header.text) if header is not None and header.ok else None
    seen = f" (nccl.h says {header_version})" if header_version else ""
    raise Absent(f"no libnccl.so.2 in the loader cache (ldconfig -p){seen}: a job using the host's "
                 "NCCL would fail to load it")


def nccl_settings_value(out: Captures) -> str:
    """/etc/nccl.conf, NCCL_* environment and net plugins, as one comparable line."""
    sections = _sections(out)

    def text(name: str, tool: str) -> str:
        # absent (no /etc/nccl.conf) is empty; present but failed is unread, never "no settings"
        return _ok_text(sections, name, tool) if sections.get(name) is not None else ""
    settings = dict(parse_nccl_conf(text("nccl-conf", "/etc/nccl.conf")))
    settings.update(parse_nccl_env(_ok_text(sections, "nccl-env", "env")))   # the environment overrides
    plugins = parse_ldconfig_nccl(_ok_text(sections, "nccl-libs", "ldconfig -p")).net_plugins
    parts = [f"{k}={v}" for k, v in sorted(settings.items())]
    parts.append("net plugin " + (", ".join(sorted(plugins)) if plugins else "none"))
    return "; ".join(parts)


@value_check("nccl.settings", what="NCCL settings", probes=[VERSIONS],
             doc="NCCL settings (/etc/nccl.conf, NCCL_* environment, net plugin) are the same on every "
                 "node: one node with another NCCL_IB_HCA or GID index can hang a collective.")
def nccl_settings(out: Captures, _want: PinOrDrift) -> str:
    return nccl_settings_value(out)


@value_check("hca.firmware", what="HCA firmware", probes=[IBSTAT],
             doc="HCA firmware per adapter type (from ibstat) is pinned and/or the same on every node.")
def hca_firmware(out: Captures, _want: PinOrDrift) -> str:
    facts = parse_ibstat(out[IBSTAT.name].stdout)
    seen = sorted({f"{ca.ca_type or '?'} {ca.firmware}" for ca in facts.cas if ca.firmware})
    if not seen:
        raise Absent("no HCA with a firmware version in ibstat output")
    return ", ".join(seen)
