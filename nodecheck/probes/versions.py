"""The versions probe: one round trip gathers kernel, OS, OFED/rdma-core and NCCL facts, each
command in its own section with its exit code; kernel.version, os.release, ofed.version,
nccl.version, nccl.settings and `nodecheck facts` read their value from it."""

from __future__ import annotations

import functools

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.sections import Sections, split_sections

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


@functools.lru_cache(maxsize=65536)  # five checks read each node's output: split it once
def _split(text: str) -> Sections:
    return split_sections(text, "versions probe")


def versions_sections(out: Captures) -> Sections:
    """The versions probe's output of one node, split into its commands' sections."""
    return _split(out[VERSIONS.name].stdout)


def ok_text(sections: Sections, name: str, tool: str) -> str:
    """A section's text when its command ran to the end and exited 0; else the ParseError that says why not."""
    section = sections.require(name, tool)
    if section.rc is None:
        raise ParseError(tool, "output cut off", section.text)
    if section.rc != 0:
        first = section.text.strip().splitlines()[:1]
        raise ParseError(tool, f"exited {section.rc}: {first[0] if first else 'no output'}", section.text)
    return section.text
