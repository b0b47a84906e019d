"""`timedatectl status` (or `timedatectl show`): the kernel's "clock synchronised" flag as systemd
reports it, whichever daemon set it. The labels changed across systemd versions:

    NTP synchronized: yes                    (<= 234)
    System clock synchronized: yes           (>= 235)
    NTPSynchronized=yes                      (`timedatectl show`, >= 239)

and so did the one naming the NTP service (NTP enabled, Network time on, systemd-timesyncd.service
active, NTP service). The values stay English whatever the locale.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

TOOL = "timedatectl"
_SYNCED = ("System clock synchronized", "NTP synchronized", "NTPSynchronized")
_SERVICE = ("NTP service", "Network time on", "NTP enabled", "systemd-timesyncd.service active", "NTP")


@dataclass(frozen=True)
class ClockStatus:
    synchronized: bool
    ntp_service: str | None  # active, inactive, n/a, yes, no; None: not printed


def parse_timedatectl(text: str) -> ClockStatus:
    fields: dict[str, str] = {}
    said: set[str] = set()  # every value a synchronised label had: one output says one thing
    for line in split_lines(text):
        key, sep, value = line.partition(":") if ": " in line else line.partition("=")
        if sep:
            fields.setdefault(key.strip(), value.strip())
            if key.strip() in _SYNCED:
                said.add(value.strip())
    if len(said) > 1:
        both = " and ".join(repr(v[:40]) for v in sorted(said))
        raise ParseError(TOOL, f"the synchronised flag printed twice, as {both}", text)
    synced = next((fields[k] for k in _SYNCED if k in fields), None)
    if synced not in ("yes", "no"):
        first = next((ln.strip() for ln in split_lines(text) if ln.strip()), "no output")
        raise ParseError(TOOL, f"no 'System clock synchronized: yes|no' line ({first[:120]})", text)
    return ClockStatus(synced == "yes", next((fields[k] for k in _SERVICE if k in fields), None))
