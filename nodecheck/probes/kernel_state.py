"""Probes of the running kernel's state: its command line (kernel.params, kernel.cmdline), the loaded
modules (kernel.modules) and /proc/sys values (kernel.params)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.cmdline import MAX_CHARS, Cmdline, parse_cmdline
from nodecheck.parsers.modules import LoadedModules, parse_lsmod, parse_proc_modules
from nodecheck.parsers.sections import Sections, split_sections

MODULES_MAX_BYTES = 1 << 20  # ~200 modules x 100 bytes; a megabyte is no module list
SYSCTL_MAX_BYTES = 4096  # one /proc/sys value (the largest, like kernel.printk_ratelimit, are short)

CMDLINE_SCRIPT = r"""
echo "@@nodecheck begin cmdline"; head -c CMDLINE_MAX /proc/cmdline 2>&1; echo "@@nodecheck end cmdline rc=$?"
""".replace("CMDLINE_MAX", str(MAX_CHARS + 1))
CMDLINE = Probe("kernel-cmdline", ("sh", "-c", CMDLINE_SCRIPT, "nodecheck-kernel-cmdline"), timeout_s=10)

# $@: module names (the playbook's, checked against a strict pattern). `lsmod` through PATH (a test's
# or a site's own comes first), else /proc/modules; a module built into the kernel has no line in
# either, but has /sys/module/NAME without the initstate a loadable module has.
MODULES_SCRIPT = r"""
if command -v lsmod >/dev/null 2>&1; then
  echo "@@nodecheck begin lsmod"; { lsmod 2>&1; echo "@@nodecheck end lsmod rc=$?"; } | head -c MODULES_MAX; echo
elif [ -r /proc/modules ]; then
  echo "@@nodecheck begin proc-modules"; head -c MODULES_MAX /proc/modules 2>&1; echo "@@nodecheck end proc-modules rc=$?"
else
  echo "@@nodecheck modules-source none"
fi
for m do
  if [ -d "/sys/module/$m" ] && [ ! -e "/sys/module/$m/initstate" ]; then echo "@@nodecheck builtin:$m 1"; fi
done
exit 0
""".replace("MODULES_MAX", str(MODULES_MAX_BYTES))

# $@: sysctl keys (checked against parsers.sysctl.KEY): each /proc/sys file in its own section; a
# key without a file is named as missing.
SYSCTL_SCRIPT = r"""
for k do
  p=/proc/sys/$(printf '%s' "$k" | tr . /)
  if [ -e "$p" ]; then
    echo "@@nodecheck begin sysctl:$k"; head -c SYSCTL_MAX "$p" 2>&1; echo "@@nodecheck end sysctl:$k rc=$?"
  else
    echo "@@nodecheck missing:$k 1"
  fi
done
exit 0
""".replace("SYSCTL_MAX", str(SYSCTL_MAX_BYTES))


def _named(base: str, args: Sequence[str]) -> str:
    return f"{base}:{hashlib.sha256(chr(0).join(args).encode()).hexdigest()[:8]}"


def modules_probe(names: Sequence[str]) -> Probe:
    args = tuple(sorted(set(names)))
    return Probe(_named("kernel-modules", args), ("sh", "-c", MODULES_SCRIPT, "nodecheck-modules", *args), timeout_s=15)


def sysctl_probe(keys: Sequence[str]) -> Probe:
    args = tuple(sorted(set(keys)))
    return Probe(_named("sysctl", args), ("sh", "-c", SYSCTL_SCRIPT, "nodecheck-sysctl", *args), timeout_s=15)


def read_cmdline_text(out: Captures) -> str:
    """/proc/cmdline as read: the ParseError says why not."""
    sections = split_sections(out[CMDLINE.name].stdout, "kernel command line probe")
    section = sections.require("cmdline", "/proc/cmdline")
    if section.rc != 0:
        raise ParseError("/proc/cmdline", f"could not be read (exit {section.rc}): {section.text.strip()[:200]}")
    return section.text


def read_cmdline(out: Captures) -> Cmdline:
    return parse_cmdline(read_cmdline_text(out))


@dataclass(frozen=True)
class ModuleFacts:
    loaded: LoadedModules
    builtin: frozenset[str]  # asked-for modules built into the kernel (no line, /sys/module without initstate)
    source: str  # "lsmod" or "/proc/modules"


def read_modules(out: Captures, probe: Probe) -> ModuleFacts:
    return _modules(out[probe.name].stdout)


def _modules(text: str) -> ModuleFacts:
    sections = split_sections(text, "kernel modules probe")
    builtin = frozenset(k.split(":", 1)[1] for k in sections.facts if k.startswith("builtin:"))
    for name, tool, parse in (("lsmod", "lsmod", parse_lsmod), ("proc-modules", "/proc/modules", parse_proc_modules)):
        section = sections.get(name)
        if section is None:
            continue
        if section.rc is None:
            raise ParseError(tool, f"output cut off (over {MODULES_MAX_BYTES} bytes)", section.text)
        if section.rc != 0:
            first = section.text.strip().splitlines()[:1]
            raise ParseError(tool, f"exited {section.rc}: {first[0] if first else 'no output'}", section.text)
        return ModuleFacts(parse(section.text), builtin, tool)
    raise ParseError(
        "kernel modules", "neither lsmod nor /proc/modules is on the node: the loaded modules cannot be read", text
    )


@dataclass(frozen=True)
class SysctlValue:
    key: str
    text: str | None  # the file's content; None: not read (why)
    why: str = ""  # "no such key", "exit 1: Permission denied"


def read_sysctls(out: Captures, probe: Probe, keys: Sequence[str]) -> dict[str, SysctlValue]:
    sections = _sysctl_sections(out[probe.name].stdout)
    values: dict[str, SysctlValue] = {}
    for key in keys:
        section = sections.get(f"sysctl:{key}")
        if f"missing:{key}" in sections.facts:
            values[key] = SysctlValue(key, None, "no such key")
        elif section is None:
            values[key] = SysctlValue(key, None, "not in the probe's output (cut off?)")
        elif section.rc != 0:
            values[key] = SysctlValue(key, None, f"exit {section.rc}: {section.text.strip()[:200]}")
        else:
            values[key] = SysctlValue(key, section.text)
    return values


def _sysctl_sections(text: str) -> Sections:
    return split_sections(text, "sysctl probe")
