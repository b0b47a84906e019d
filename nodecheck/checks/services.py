"""services: the node's daemons a GPU job depends on are running and not flapping."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe, Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Ceiling
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.parsers.systemctl import Process, UnitState, parse_process_list, parse_systemctl_show
from nodecheck.probes.services import UID_MIN, services_probe

__all__ = ["UID_MIN", "Services", "services"]  # UID_MIN: the probe's, shared with nvlink.fabric

# A unit name as systemd allows it (systemd.unit(5): ASCII letters, digits, ":", "-", "_", ".", "\",
# "@" for instances), less "\": it reaches the node's shell as a word, so no blank and no glob character
_UNIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_.@-]{0,250}")
_SUFFIXES = (".service", ".socket", ".target", ".timer", ".mount", ".path", ".scope", ".slice", ".swap")
# comm of the process a unit runs, where it is not the unit's own name (the kernel cuts comm to 15
# characters: "nvidia-persistenced" reads "nvidia-persiste"; matched on that cut)
PROCESS_OF = {
    "nvidia-fabricmanager": "nv-fabricmanager",
    "munge": "munged",
    "chrony": "chronyd",
    "ntp": "ntpd",
    "ntpsec": "ntpd",
    "docker": "dockerd",
    "nvidia-dcgm": "nv-hostengine",
    "dcgm": "nv-hostengine",
    "ssh": "sshd",
    "rdma-ndd": "rdma-ndd",
    "openibd": "",  # a oneshot: nothing keeps running
}
NO_SYSTEMD = "no systemd: judged by process list"


def _alternatives(value: str) -> str:
    names = value.split("|")
    bad = [n for n in names if not _UNIT.fullmatch(n)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a systemd unit name like slurmd or chronyd.service")
    return value


Units = Annotated[str, AfterValidator(_alternatives)]


class Services(BaseModel):
    """Which units must run, which only where NVSwitches exist, which must not, and how many
    automatic restarts mean flapping."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    required: list[Units] = Field(
        # a GPU node of a Slurm cluster: the driver kept initialised between jobs (NVIDIA driver
        # persistence docs), the Slurm node daemon and its authentication (munge), a time daemon
        ["nvidia-persistenced", "slurmd", "munge", "chronyd|chrony|systemd-timesyncd|ntpd"],
        description="units that must be active; 'a|b' means any one of them (chronyd|ntpd)",
    )
    with_nvswitch: list[Units] = Field(
        # NVSwitch systems (HGX/DGX A100, H100, H200, B200) need fabric manager before any CUDA job
        # can use NVLink (NVIDIA Fabric Manager user guide)
        ["nvidia-fabricmanager"],
        description="units required only where the node has NVSwitches (/dev/nvidia-nvswitchN or "
        "/proc/driver/nvidia-nvswitch/devices/*)",
    )
    optional: list[Units] = Field(
        ["docker", "containerd"],
        description="units judged only where installed (the container runtime): if there, they must be active",
    )
    forbidden: list[Units] = Field([], description="units that must not be running")
    restarts: Ceiling = Field(
        # NRestarts counts restarts by Restart= since the unit was last started by hand (systemd 235+);
        # any is a crash, more than 3 a daemon in a crash loop (systemd's own start limit stops a unit
        # at 5 starts in 10 s: DefaultStartLimitBurst, systemd-system.conf(5))
        Ceiling(warn_above=0, fail_above=3),
        description="automatic restarts (NRestarts) of an active unit; more is flapping",
    )


def _unit_name(name: str) -> str:
    return name if name.endswith(_SUFFIXES) else f"{name}.service"


def _process(unit: str) -> str:
    """The name of the process the unit runs ("" for none); /proc/PID/comm holds its first 15 characters."""
    base = unit.rsplit(".", 1)[0] if unit.endswith(_SUFFIXES) else unit
    base = base.split("@", 1)[0]
    return PROCESS_OF.get(base, base)


def _all_units(want: Services) -> list[str]:
    names = [n for group in (want.required, want.with_nvswitch, want.optional, want.forbidden) for n in group]
    return list(dict.fromkeys(_unit_name(u) for alts in names for u in alts.split("|")))


def _probes(want: Services) -> list[Probe]:
    units = _all_units(want)
    return [services_probe(units, sorted({p[:15] for p in map(_process, units) if p}))]


@check("services", probes=_probes, params=Services)
def services(out: Captures, want: Services) -> Iterator[Verdict]:
    """The daemons a GPU job needs are running and not flapping: nvidia-persistenced, slurmd, munge,
    a time daemon, nvidia-fabricmanager where NVSwitches exist (systemd units; the process list
    where systemd is not the init system).

    Without systemd a daemon is a process of this mount namespace of its name whose real uid is
    root's or a system account's and whose binary is a root-owned one of that name in a root-owned
    directory: a job's user cannot stand in for a stopped daemon with a process named like it."""
    probe = _probes(want)[0]
    text = out[probe.name].stdout
    sections = split_sections(text, "services probe")
    nvswitch = sections.get("nvswitch")
    procs = sections.get("procs")
    if nvswitch is None or procs is None or nvswitch.rc is None:
        yield Verdict(Status.ERROR, "the services probe's output was cut off", excerpt=excerpt(text))
        return
    switches = [ln for ln in nvswitch.text.splitlines() if ln.strip()]
    groups = [(alts, "required") for alts in want.required]
    if switches:
        groups += [(alts, "nvswitch") for alts in want.with_nvswitch]
    groups += [(alts, "optional") for alts in want.optional] + [(alts, "forbidden") for alts in want.forbidden]
    if sections.facts.get("systemd") == "yes":
        yield from _by_systemd(sections, groups, want, _all_units(want))
    else:
        yield from _by_processes(parse_process_list(procs.text), _not_daemons(procs.text), groups)
    if not switches:
        for alts in want.with_nvswitch:
            yield Verdict(
                Status.PASS,
                f"{_shown(alts)}: not required, no NVSwitch on this node "
                "(no /dev/nvidia-nvswitchN, no /proc/driver/nvidia-nvswitch/devices/*)",
                alts,
                {"nvswitches": 0},
            )


def _shown(alts: str) -> str:
    return " or ".join(_unit_name(u) for u in alts.split("|"))


# --- with systemd -----------------------------------------------------------------------------


def _by_systemd(sections: Sections, groups, want: Services, units: list[str]) -> Iterator[Verdict]:
    if "no_systemctl" in sections.facts:
        yield Verdict(Status.ERROR, sections.facts["no_systemctl"])
        return
    show = sections.get("show")
    if show is None or show.rc is None:
        yield Verdict(
            Status.ERROR, "systemctl show did not finish (cut off)", excerpt=excerpt(show.text if show else "")
        )
        return
    if show.rc == 124:  # timeout(1)'s exit: systemd did not answer within 10 s
        yield Verdict(
            Status.ERROR, "systemctl show timed out after 10 s (systemd not answering)", excerpt=excerpt(show.text)
        )
        return
    try:
        states = parse_systemctl_show(show.text)
        if show.rc != 0:
            raise ParseError("systemctl show", f"exited {show.rc}", show.text)
        if len(states) != len(units):
            raise ParseError("systemctl show", f"{len(states)} units printed for {len(units)} asked", show.text)
    except ParseError as e:
        yield Verdict(Status.ERROR, f"cannot read systemctl show: {e.reason}", excerpt=e.excerpt)
        return
    # one block per unit named, in that order (an alias's block carries the unit it names as Id)
    by_name = dict(zip(units, states))
    for alts, role in groups:
        found = [(u, by_name[_unit_name(u)]) for u in alts.split("|")]
        if role == "forbidden":
            yield from (_forbidden_unit(alts, _unit_name(u), s) for u, s in found)
        elif role == "optional":
            yield from (_optional_unit(alts, _unit_name(u), s, want) for u, s in found)
        else:
            yield _required_unit(alts, found, role, want)


def _required_unit(alts: str, found: list[tuple[str, UnitState]], role: str, want: Services) -> Verdict:
    why = " (the node has NVSwitches)" if role == "nvswitch" else ""
    active = next(((u, s) for u, s in found if s.active), None)
    if active is not None:
        return _restarts(alts, _unit_name(active[0]), active[1], want, why)
    states = "; ".join(_state_words(_unit_name(u), s) for u, s in found)
    expected = "one of them active" if len(found) > 1 else "active"
    return Verdict(
        Status.FAIL,
        f"{states}, expected {expected}{why}",
        alts,
        # `down`: the units that are not active, by name (what a remediation ladder matches on)
        {
            **{_unit_name(u): s.active_state if s.installed else s.load_state for u, s in found},
            "down": [_unit_name(u) for u, _ in found],
        },
        {"active_state": "active"},
    )


def _state_words(name: str, s: UnitState) -> str:
    if s.load_state == "not-found":
        return f"{name} not installed (LoadState=not-found)"
    if s.load_state == "masked":
        return f"{name} masked"
    if s.sub_state == "auto-restart":
        return f"{name} {s.state}: crashed and waiting to be restarted"
    return f"{name} {s.state}"


def _restarts(alts: str, name: str, s: UnitState, want: Services, why: str = "") -> Verdict:
    since = f" since {s.active_enter}" if s.active_enter else ""
    observed: dict[str, object] = {"unit": name, "active_state": s.active_state, "sub_state": s.sub_state}
    if s.n_restarts is None:
        return Verdict(
            Status.PASS,
            f"{name} {s.state}{since}{why}; restart count not reported (systemd older than 235)",
            alts,
            observed,
        )
    observed["restarts"] = s.n_restarts
    band = want.restarts.judge(s.n_restarts, what="restarts", unit="")
    if band.status is Status.PASS:
        return Verdict(Status.PASS, f"{name} {s.state}{since}{why}, {s.n_restarts} restarts", alts, observed)
    limit = want.restarts.fail_above if band.status is Status.FAIL else want.restarts.warn_above
    return Verdict(
        band.status,
        f"{name} {s.state}{since} but restarted {s.n_restarts} times by systemd (NRestarts), expected "
        f"<= {limit:g}: it crashed and came back, flapping",
        alts,
        observed,
        {"restarts": limit},
    )


def _optional_unit(alts: str, name: str, s: UnitState, want: Services) -> Verdict:
    if not s.installed:
        return Verdict(Status.PASS, f"{name} not installed (optional)", alts, {"load_state": s.load_state})
    if s.active:
        return _restarts(alts, name, s, want, " (optional)")
    return Verdict(
        Status.FAIL,
        f"{_state_words(name, s)}, expected active (optional, but installed)",
        alts,
        {"active_state": s.active_state},
        {"active_state": "active"},
    )


def _forbidden_unit(alts: str, name: str, s: UnitState) -> Verdict:
    if s.active or s.active_state in ("activating", "reloading"):
        return Verdict(
            Status.FAIL, f"{name} {s.state}, expected not running (forbidden)", alts, {"active_state": s.active_state}
        )
    return Verdict(Status.PASS, f"{name} not running ({s.state}; forbidden)", alts, {"active_state": s.active_state})


# --- without systemd: the process list --------------------------------------------------------


def _not_daemons(text: str) -> list[Process]:
    """The probe's "!"-marked lines: processes of root or a system account named like a daemon whose
    binary is not a root-owned one of that name (probes/services.py: DAEMON_FUNCTIONS)."""
    return parse_process_list("\n".join(line[1:] for line in text.splitlines() if line.startswith("!")))


def _by_processes(procs: list[Process], not_daemons: list[Process], groups) -> Iterator[Verdict]:
    """Without systemd a daemon is a process of this mount namespace of its name, run by root or a
    system account (the REAL uid) from a root-owned binary of that name (the probe tells those apart):
    a job's user cannot make one, whatever they name a process."""
    for alts, role in groups:
        units = alts.split("|")
        processes = list(dict.fromkeys(p for p in map(_process, units) if p))
        comms = [p[:15] for p in processes]
        here = [p for p in procs if p.comm in comms and p.namespace == "same"]
        forged = [p for p in not_daemons if p.comm in comms and p.namespace == "same"]
        mine = [p for p in here if p.uid is not None and p.uid < UID_MIN]
        impostors = [p for p in here if p not in mine]
        elsewhere = [p for p in procs if p.comm in comms and p.namespace == "other"]
        unknown = [p for p in procs if p.comm in comms and p.namespace == "unknown"]
        names = " or ".join(processes) or "no process (a oneshot unit)"
        observed = {"processes": [p.pid for p in mine], "judged_by": "process list"}
        if role == "forbidden":  # whoever runs it, from whichever binary
            if here or forged:
                yield Verdict(
                    Status.FAIL,
                    f"{names} running (pid {_pids(here + forged)}), expected not running (forbidden; {NO_SYSTEMD})",
                    alts,
                    observed,
                )
            else:
                yield Verdict(Status.PASS, f"{names} not running (forbidden; {NO_SYSTEMD})", alts, observed)
            continue
        if mine:
            yield Verdict(Status.PASS, f"{names} running (pid {_pids(mine)}; {NO_SYSTEMD})", alts, observed)
            continue
        if role == "optional":
            yield Verdict(
                Status.PASS,
                f"{names} not running (optional; {NO_SYSTEMD}: whether it is installed cannot be told)",
                alts,
                observed,
            )
            continue
        if unknown:
            yield Verdict(
                Status.ERROR,
                f"cannot tell whether {names} runs on this node: {len(unknown)} process(es) of that name whose "
                f"mount namespace could not be read (pid {_pids(unknown)}; is nodecheck running as root?)",
                alts,
                observed,
            )
            continue
        other = (
            f"; {len(elsewhere)} process(es) of that name run in other mount namespaces (other nodes' or "
            f"containers', pid {_pids(elsewhere)})"
            if elsewhere
            else ""
        )
        if impostors:
            users = ", ".join(sorted({"unknown" if p.uid is None else str(p.uid) for p in impostors}))
            other += (
                f"; {len(impostors)} process(es) of that name run as a user account (uid {users}, pid "
                f"{_pids(impostors)}), not the daemon"
            )
        if forged:
            other += (
                f"; {len(forged)} process(es) of that name run as root or a system account but not a root-owned "
                f"{names} binary (pid {_pids(forged)}), not the daemon"
            )
        why = " (the node has NVSwitches)" if role == "nvswitch" else ""
        yield Verdict(
            Status.FAIL,
            f"{_shown(alts)} not running: no process named {names} "
            f"{'of root or a system account ' if impostors or forged else ''}on this node{other}, expected running"
            f"{why} ({NO_SYSTEMD})",
            alts,
            observed,
            {"running": True},
        )


def _pids(procs: list[Process]) -> str:
    shown = ", ".join(str(p.pid) for p in procs[:5])
    return shown + (f" and {len(procs) - 5} more" if len(procs) > 5 else "")
