"""`nodecheck facts` (every node's facts, unjudged) and `nodecheck baseline` (the pins the nodes agree on)."""

from __future__ import annotations

import sys
from argparse import Namespace
from typing import NamedTuple

from nodecheck.app import transports
from nodecheck.app.progress_view import terminal_progress, wanted
from nodecheck.app.signals import stop_on_signals
from nodecheck.app.targets import reach
from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Status, Verdict

FACTS_DEADLINE_S = 300.0  # facts/baseline without --deadline


def facts_command(args: Namespace) -> int:
    """`nodecheck facts`: every node's facts, unjudged; exit 3 if some could not be read."""
    import json

    from nodecheck.run import facts as facts

    g = _gather(args)
    data = facts.all_facts(g)
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(_facts_table(data, g.value_checks))
    unread = any(
        "error" in (v if isinstance(v, dict) else {})
        for node in data["nodes"].values()
        for v in [node["gpu"], node["hca"], node["kernel_log"], node["nccl"], *node["values"].values()]
    )
    if g.incomplete:
        print(f"nodecheck: warning: incomplete: {g.incomplete}", file=sys.stderr)
    return 3 if unread or g.incomplete else 0


def baseline_command(args: Namespace) -> int:
    """`nodecheck baseline`: the pins the nodes agree on, as an includable YAML file on stdout."""
    from datetime import datetime, timezone

    from nodecheck.run import facts as facts

    sdc = _sdc_reference(args) if args.sdc else None
    g = _gather(args)
    base = facts.baseline(g)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"# Written by `nodecheck baseline` at {when} from {fold(g.nodes)}"
        + (f" ({args.inventory})" if args.inventory else "")
        + ".",
        "# Use it:  nodecheck run hosts.yml --playbook PLAYBOOK --pins THIS-FILE.yml",
        "# or in a playbook:  include: [THIS-FILE.yml]",
        "version: 1",
        "checks:",
    ]
    for name, value in base.pins.items():
        extra = ""
        if name == "container.digest" and g.image is not None:
            extra = f"image: {_yaml_str(g.image.image)}, " + (
                f"runtime: {g.image.runtime}, " if g.image.runtime != "auto" else ""
            )
        lines.append(f"  {name}: {{{extra}expect: {_yaml_str(value)}}}")
    if sdc is not None and sdc.pins:
        refs = ", ".join(f"{_yaml_str(k)}: {_yaml_str(v)}" for k, v in sdc.pins.items())
        lines.append(f"  gpu.sdc: {{reference: {{{refs}}}}}")
    if not base.pins and not (sdc and sdc.pins):
        lines[-1] = "checks: {}"
    for why in sdc.not_pinned if sdc else ():
        lines.append(f"# gpu.sdc not pinned: {why}")
        print(f"nodecheck: gpu.sdc not pinned: {why}", file=sys.stderr)
    for name, why in base.disagreements.items():
        lines.append(f"# not pinned, the nodes disagree: {name}: {why}")
        print(f"nodecheck: {name} not pinned: the nodes disagree: {why}", file=sys.stderr)
    for name, why in base.unreadable.items():
        lines.append(f"# not pinned, not read on every node: {name}: {why}")
        print(f"nodecheck: {name} not pinned: {why}", file=sys.stderr)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if base.clean and not g.incomplete and not (sdc and sdc.not_pinned) else 2


def _lone(v: Verdict) -> bool:
    """The only GPU of its kind (not compared, no other fault): the operator's known-good node is its
    reference."""
    return (
        v.status is Status.SKIPPED and v.observed.get("group_gpus") == 1 and v.observed.get("expected_from") == "none"
    )


class SdcPins(NamedTuple):
    pins: dict[str, str]  # group -> the checksum every GPU of it computed
    not_pinned: list[str]  # why a group (or the whole screen) gave no pin


def _sdc_reference(args: Namespace) -> SdcPins:
    """`baseline --sdc PLAYBOOK`: run that playbook's gpu.sdc on the nodes and pin, per group of GPUs of
    one model and software, the checksum all of them computed. A group whose GPUs disagree, or a node
    the screen could not judge, gives no pin: a reference must be known good."""
    import dataclasses

    from nodecheck.config.playbook import load_playbook
    from nodecheck.run import runner

    if not args.allow_disruptive:
        raise ConfigError(
            "--sdc runs the SDC screen: every GPU of every node is loaded",
            file="arguments",
            hint="add --allow-disruptive (idle nodes only: a busy node is not screened)",
        )
    book = load_playbook(args.sdc)
    screen = tuple(c for c in book.checks if c.spec.name == "gpu.sdc")
    if not screen:
        raise ConfigError(
            f"{book.path} has no gpu.sdc: the reference is for its workload",
            file="arguments",
            hint="name the playbook whose gpu.sdc the pins are for: --sdc sweep, --sdc acceptance",
        )
    nodes, transport = reach(args)
    with terminal_progress(wanted(args)) as progress, stop_on_signals() as stop:
        report = runner.run(
            dataclasses.replace(book, checks=screen),
            nodes,
            transport,
            fanout=args.fanout,
            deadline_s=args.deadline or book.deadline_s,
            stop=stop,
            allow_disruptive=True,
            progress=progress,
        )
    not_pinned = [
        f"{r.nodes[0]}: {r.verdict.status.value}: {r.verdict.message}"
        for r in report.results
        if r.verdict.status is not Status.PASS and not _lone(r.verdict)
    ]
    groups = report.extras.get("gpu.sdc", {}).get("groups", {})
    pins: dict[str, str] = {}
    for key, group in groups.items():
        sums = group.get("checksums", {})
        if len(sums) == 1 and not not_pinned:
            pins[key] = next(iter(sums))
        else:
            not_pinned.append(f"{key}: {len(sums)} different checksums among {group.get('gpus')} GPUs")
    return SdcPins(pins, not_pinned)


def _yaml_str(value: str) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def _gather(args: Namespace):
    from pydantic import ValidationError

    from nodecheck.checks.container import ContainerDigest
    from nodecheck.run import facts as facts

    image = None
    if args.image:
        try:
            image = ContainerDigest(image=args.image, runtime=args.runtime)
        except ValidationError as e:
            raise ConfigError(f"--image: {e.errors()[0]['msg']}", file="arguments") from None
    nodes, transport = reach(args)
    if not args.local:
        transports.ensure_open_files(min(args.fanout, len(nodes)))
    with terminal_progress(wanted(args)) as progress, stop_on_signals() as stop:
        return facts.gather(
            nodes,
            transport,
            fanout=args.fanout,
            deadline_s=args.deadline or FACTS_DEADLINE_S,
            image=image,
            stop=stop,
            progress=progress,
        )


def _facts_table(data: dict, value_checks) -> str:
    from tabulate import tabulate

    columns = [c for c in value_checks if c not in ("nccl.settings",)]
    rows, notes = [], []
    for node, facts in data["nodes"].items():
        gpu = facts["gpu"]
        gpus = "error" if "error" in gpu else f"{len(gpu['gpus'])} ({gpu['source']})"
        if "error" not in gpu and gpu.get("source_note"):
            # why the slow path answered: "NVML unavailable (cannot import pynvml ...); read from nvidia-smi"
            notes.append(f"{node}: GPUs: {gpu['source_note']}")
        cells = [v if isinstance(v, str) else "error" for v in (facts["values"][c] for c in columns)]
        rows.append([node, gpus, _nvlink_domain(gpu), *cells])
    table = tabulate(rows, headers=["node", "gpus", "nvlink domain", *columns], tablefmt="simple") + "\n"
    return table + "".join(f"{note}\n" for note in notes)


def _nvlink_domain(gpu: dict) -> str:
    """The NVLink domain the node's GPUs registered in, short: "ClusterUUID's first 8/CliqueId"
    ("6a130f54/32766"; an HGX board's all-zero "00000000/0"), or the fabric states where any GPU's
    registration did not complete, or "-" where no GPU reports fabric info (pre-Hopper, old driver)."""
    if "error" in gpu:
        return "error"
    fabrics = [g.get("fabric") for g in gpu["gpus"]]
    if not any(fabrics):
        return "-"
    seen: dict[str, int] = {}
    for f in fabrics:
        if not f:
            key = "not reported"
        elif f["state"] == "completed" and f["status"] == "success":
            key = f"{(f['cluster_uuid'] or '?')[:8]}/{f['clique_id'] if f['clique_id'] is not None else '?'}"
        else:
            key = f["state"] if f["state"] != "completed" else f"completed, {f['status']}"
        seen[key] = seen.get(key, 0) + 1
    if len(seen) == 1:
        return next(iter(seen))
    return ", ".join(f"{key} ({n})" for key, n in sorted(seen.items()))
