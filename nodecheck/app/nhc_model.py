"""The shared types of the NHC import: what a translation holds (its lines, refusals and notes), the
context earlier lines of the file set for later ones, the exit codes and each check's baseline block."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EXIT_TRANSLATED = 0  # every directive translated (or needs nothing in nodecheck)
EXIT_NOTHING = 2  # no directive could be translated: no playbook written
EXIT_PARTIAL = 3  # the playbook was written, some lines were not translated (listed)

KIB = 1024


class Refused(Exception):
    """A directive that does not translate; the message says why, in the operator's words."""


@dataclass(frozen=True)
class Untranslated:
    line: int
    text: str
    reason: str


@dataclass(frozen=True)
class Remark:
    """A line that translated (with what the operator should know) or needs nothing."""

    line: int
    text: str
    note: str


@dataclass(frozen=True)
class Piece:
    """One directive's part of one check's block."""

    check: str
    block: dict[str, Any]
    note: str = ""
    replace: bool = False  # the block is the whole check so far (built from every such line)


@dataclass
class Translation:
    source: str
    sha256: str
    lines: int
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    origins: dict[str, list[Remark]] = field(default_factory=dict)  # per check: the lines that built it
    ignored: list[Remark] = field(default_factory=list)  # lines that need nothing in nodecheck
    untranslated: list[Untranslated] = field(default_factory=list)
    deadline_s: float | None = None
    deadline_line: Remark | None = None

    @property
    def exit_code(self) -> int:
        if not self.checks:
            return EXIT_NOTHING
        return EXIT_PARTIAL if self.untranslated else EXIT_TRANSLATED


@dataclass
class Context:
    """What earlier lines of the file set: variables (for $VAR) and facts later lines use."""

    variables: dict[str, str] = field(default_factory=dict)
    threads: int | None = None  # from check_hw_cpuinfo: a load limit becomes a per-CPU ratio
    threads_line: int = 0
    eth_devices: list[str] = field(default_factory=list)  # check_hw_eth's, in file order
    # settings with no counterpart of their own, by line: untranslated unless a translated line used them
    settings: dict[int, tuple[str, Untranslated]] = field(default_factory=dict)
    used: dict[str, set[int]] = field(default_factory=dict)  # variable -> translated lines that used it
    reading: set[str] = field(default_factory=set)  # the variables the line being translated used


class NoOp(Exception):
    """A directive that can never fail: nothing to translate (noted, not refused)."""


# Each check's block starts from these: what nodecheck judges by default beyond what NHC's lines
# said is turned off, so the playbook checks what the NHC file checked (the shipped playbooks have them)
BASELINE: dict[str, dict[str, Any]] = {
    "fs.mounts": {"from_fstab": False},
    "fs.free": {"shm": None, "tmp": None},
    "mem": {"available_pct": None, "ecc": "off"},
    "services": {"required": [], "with_nvswitch": [], "optional": []},
    "proc.health": {"d_state": "off", "zombies": None, "load_warn_per_cpu": None, "leftovers": "off"},
}


def block_of(result: Translation, check: str) -> dict[str, Any]:
    """The check's block as the playbook holds it: its baseline under what the lines set."""
    return {**BASELINE.get(check, {}), **result.checks[check]}
