"""A fake Slurm 22.05 `scontrol` (show node, update State=DRAIN|RESUME, reboot), for tests/gate/test_slurm.py and
tests/gate/test_command.py. `install()` copies this file into a directory as an executable `scontrol`;
everything the copy keeps lives beside it, found from its own path (a Prolog's environment has no
room for more variables): see tests/fakes/README.md, "scontrol.py"."""

from __future__ import annotations

import json
import os
import stat
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODES = HERE / "nodes.json"  # {name: {"state", "reason", "user", "time"}}, rewritten by update
ARGV_LOG = HERE / "argv.log"  # one JSON line per call: {"argv": [...], "SLURM_TIME_FORMAT": ...}
CLOCK = HERE / "clock"  # a fixed reason stamp; without it the local time now, as slurmctld
UPDATE_FAILS = HERE / "update-fails"  # present: every update fails as when slurmctld cannot be reached
HANGS = HERE / "hangs"  # present: calls whose first word it lists ("update", "show") hang,
# as scontrol does while slurmctld is down (it retries for minutes)


def install(directory: Path, nodes: dict[str, dict], *, clock: str | None = None) -> Path:
    """Copy the fake into `directory` as `scontrol`, run by this interpreter, with these node states;
    `clock` fixes the stamp of every reason it sets. Returns the script's path."""
    script = directory / "scontrol"
    script.write_text(f"#!{sys.executable}\n" + Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (directory / NODES.name).write_text(json.dumps(nodes), encoding="utf-8")
    if clock is not None:
        (directory / CLOCK.name).write_text(clock + "\n", encoding="utf-8")
    return script


def gate_site(root: Path, playbook: Path, node: str = "nodeX") -> dict[str, str]:
    """A one-node Slurm site under `root` for the local gate (prolog, health): this fake as `scontrol`
    (the node IDLE), a gate config naming `playbook`, reports and log under `root`. Returns the
    environment slurmd gives a Prolog: a bare one, the node's name, a job id and the config."""
    (root / "slurm").mkdir()
    scontrol = install(root / "slurm", {node: {"state": "IDLE", "reason": "", "user": ""}})
    config = root / "nodecheck.yml"
    config.write_text(
        f"output_dir: {root / 'reports'}\nlog_file: {root / 'gate.log'}\nscontrol: {scontrol}\nplaybook: {playbook}\n",
        encoding="utf-8",
    )
    return {"SLURMD_NODENAME": node, "SLURM_JOB_ID": "7", "NODECHECK_GATE_CONFIG": str(config)}


def calls(directory: Path) -> list[dict]:
    """The argv log of the copy in `directory`: one {"argv", "SLURM_TIME_FORMAT"} per call, in order."""
    log = directory / ARGV_LOG.name
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def block(name: str, node: dict) -> str:
    """One node as 22.05 prints it; a reason's further lines indented under its first."""
    lines = [
        f"NodeName={name} Arch=x86_64 CoresPerSocket=32 ",
        "   CPUAlloc=0 CPUEfctv=128 CPUTot=128 CPULoad=0.03",
        "   AvailableFeatures=h100",
        "   ActiveFeatures=h100",
        "   Gres=gpu:h100:8(S:0-1)",
        f"   NodeAddr={name} NodeHostName={name} Version=22.05.8",
        "   OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) ",
        "   RealMemory=1031000 AllocMem=0 FreeMem=1013472 Sockets=2 Boards=1",
        f"   State={node['state']} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "   Partitions=gpu ",
        "   BootTime=2026-11-20T08:12:40 SlurmdStartTime=2026-11-20T08:14:02",
        "   LastBusyTime=2026-11-29T13:58:11",
        "   CfgTRES=cpu=128,mem=1031000M,billing=128,gres/gpu=8",
        "   AllocTRES=",
        "   CapWatts=n/a",
        "   CurrentWatts=0 AveWatts=0",
        "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    if node.get("reason"):
        first, *more = node["reason"].split("\n")
        lines.append(f"   Reason={first} [{node['user']}@{node['time']}]")
        lines += ["          " + m for m in more]
    return "\n".join(lines) + "\n\n"


def stamp() -> str:
    if CLOCK.exists():
        return CLOCK.read_text(encoding="utf-8").strip()
    return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")


def fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def show_node(nodes: dict[str, dict], args: list[str]) -> int:
    names = args[0].split(",") if args else list(nodes)
    missing = [m for m in names if m not in nodes]
    if missing:
        print(f"Node {missing[0]} not found")  # scontrol prints this one on stdout
        return 1
    sys.stdout.write("".join(block(m, nodes[m]) for m in names))
    return 0


def update(nodes: dict[str, dict], args: list[str]) -> int:
    """DRAIN and RESUME as slurmctld applies them to these states, with its refusals."""
    if UPDATE_FAILS.exists():
        return fail("slurm_update error: Unable to contact slurm controller (connect failure)")
    fields = dict(a.split("=", 1) for a in args)
    name, state = fields["NodeName"], fields["State"]
    if name not in nodes:
        return fail("slurm_update error: Invalid node name specified")
    node = nodes[name]
    words = node["state"].split("+")
    if state == "DRAIN":
        if not fields.get("Reason"):
            return fail("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        node["state"] = "+".join(words if "DRAIN" in words else [words[0], "DRAIN"] + words[1:])
        node.update(reason=fields["Reason"], user="root", time=stamp())
    elif state == "RESUME":
        node["state"] = "+".join("IDLE" if w == "DOWN" else w for w in words if w != "DRAIN")
        node.update(reason="", user="", time="")
    NODES.write_text(json.dumps(nodes), encoding="utf-8")
    return 0


def reboot(nodes: dict[str, dict], args: list[str]) -> int:
    """`reboot [ASAP] [nextstate=..] [reason=R] NODE`: issued at once on an idle node, as slurmctld
    does, which appends " : reboot issued" to the reason (the node then reboots: the test moves it on)."""
    if UPDATE_FAILS.exists():
        return fail("slurm_reboot error: Unable to contact slurm controller (connect failure)")
    fields = dict(a.split("=", 1) for a in args if "=" in a)
    (name,) = [a for a in args if "=" not in a and a != "ASAP"]
    if name not in nodes:
        return fail("slurm_reboot error: Invalid node name specified")
    node = nodes[name]
    words = [w for w in node["state"].split("+") if w not in ("IDLE", "DOWN")]
    node["state"] = "+".join(["DOWN", *words, "REBOOT_ISSUED"])
    node.update(reason=fields.get("reason", "reboot requested") + " : reboot issued", user="root", time=stamp())
    NODES.write_text(json.dumps(nodes), encoding="utf-8")
    return 0


def main(args: list[str]) -> int:
    with open(ARGV_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": args, "SLURM_TIME_FORMAT": os.environ.get("SLURM_TIME_FORMAT")}) + "\n")
    if HANGS.exists() and args[:1] and args[0] in HANGS.read_text(encoding="utf-8").split():
        print(
            "slurm_load_node: Unable to contact slurm controller (connect failure), retrying",
            file=sys.stderr,
            flush=True,
        )
        import time

        time.sleep(600)
    nodes = json.loads(NODES.read_text(encoding="utf-8"))
    if args[:2] == ["show", "node"]:
        return show_node(nodes, args[2:])
    if args[:1] == ["update"]:
        return update(nodes, args[1:])
    if args[:1] == ["reboot"]:
        return reboot(nodes, args[1:])
    return fail(f"invalid keyword: {args[0] if args else ''}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
