"""`systemctl show` (KEY=VALUE lines, one block per unit, blocks separated by a blank line) and the
services probe's process list (what is running where systemd is not)."""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.counts import u64
from nodecheck.parsers.lines import split_lines

TOOL = "systemctl show"
# what a block must hold to say anything about a unit
_REQUIRED = ("Id", "LoadState", "ActiveState", "SubState")


@dataclass(frozen=True)
class UnitState:
    """One unit as `systemctl show` reports it."""

    id: str  # "slurmd.service"; for an alias, the unit it names ("chronyd" -> "chrony.service" on Debian)
    load_state: str  # loaded, not-found, masked, bad-setting, error
    active_state: str  # active, reloading, inactive, failed, activating, deactivating
    sub_state: str  # running, exited, dead, failed, auto-restart, ...
    result: str | None  # success, exit-code, signal, core-dump, start-limit-hit, ... (None: not shown)
    n_restarts: int | None  # automatic restarts (Restart=) since the last start by hand; None: systemd < 235
    active_enter: str | None  # ActiveEnterTimestamp as printed; None: empty or not shown

    @property
    def active(self) -> bool:
        return self.active_state == "active"

    @property
    def installed(self) -> bool:
        return self.load_state not in ("not-found", "masked")

    @property
    def state(self) -> str:
        """How a message names its state: "failed (failed, Result=exit-code)", "active (running)"."""
        result = f", Result={self.result}" if self.result and self.result != "success" else ""
        return f"{self.active_state} ({self.sub_state}{result})"


def parse_systemctl_show(text: str) -> list[UnitState]:
    """Every block of `systemctl show` output, in the order printed (systemctl prints one block per
    unit named on its command line, in that order). A line that is not KEY=VALUE is a message from
    systemctl ("Failed to connect to bus", "Access denied"): the output cannot be trusted."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in split_lines(text):
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or not key or not key.replace("_", "").isalnum():
            raise ParseError(TOOL, f"not a KEY=VALUE line: {line.strip()[:120]!r}", text)
        current[key] = value
    if current:
        blocks.append(current)
    if not blocks:
        raise ParseError(TOOL, "no unit in the output", text)
    return [_unit(block, text) for block in blocks]


def _unit(block: dict[str, str], text: str) -> UnitState:
    missing = [k for k in _REQUIRED if not block.get(k)]
    if missing:
        name = block.get("Id") or block.get("Names") or "a unit"
        raise ParseError(TOOL, f"{name}: no {', '.join(missing)} in its block", text)
    restarts = block.get("NRestarts")
    if restarts is not None and u64(restarts) is None:  # systemd prints an unsigned (32-bit) count
        raise ParseError(TOOL, f"{block['Id']}: NRestarts={restarts[:40]!r} is not a count", text)
    return UnitState(
        id=block["Id"],
        load_state=block["LoadState"],
        active_state=block["ActiveState"],
        sub_state=block["SubState"],
        result=block.get("Result") or None,
        n_restarts=int(restarts) if restarts is not None else None,
        active_enter=block.get("ActiveEnterTimestamp") or None,
    )


# --- the services probe's process list ------------------------------------------------------------


@dataclass(frozen=True)
class Process:
    pid: int
    namespace: str  # "same": this shell's mount namespace; "other"; "unknown": could not be read
    uid: int | None  # the process's user (the owner of /proc/PID); None: it could not be read
    comm: str  # /proc/PID/comm: the name, cut by the kernel to 15 characters


def parse_process_list(text: str) -> list[Process]:
    """The probe's `PID<TAB>same|other|unknown<TAB>UID<TAB>COMM` lines. Any process can rename itself
    (prctl PR_SET_NAME) to hold a tab or a newline: a line that does not read so is skipped, never
    an error a user could plant to silence the check."""
    found = []
    for line in split_lines(text):
        pid, _, rest = line.partition("\t")
        namespace, _, rest = rest.partition("\t")
        uid, _, comm = rest.partition("\t")
        number, user = u64(pid), u64(uid)  # "²" passed str.isdigit() and then raised in int()
        if (
            number is not None
            and namespace in ("same", "other", "unknown")
            and (user is not None or uid == "?")
            and comm
        ):
            found.append(Process(number, namespace, user, comm))
    return found
