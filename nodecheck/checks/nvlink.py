"""nvlink.fabric and nvlink.domain: the NVLink fabric a multi-GPU job needs.

On NVSwitch boards (HGX/DGX A100, H100, H200, B200) no CUDA job can use NVLink until Fabric Manager
has configured the switches and registered every GPU (NVIDIA Fabric Manager User Guide); a Fabric
Manager that stayed down for weeks left every GPU looking healthy (NVSentinel #883). On GB200/GB300
NVL72 racks the GPUs of a job must share one NVLink domain (ClusterUUID) and partition (CliqueId):
a node outside it passes per-node checks and then fails NCCL or merges ranks wrongly (azhpc-images
#506, NCCL #2186). GPU facts come from the GPU probe (checks/gpu.py); services, NVSwitches and IMEX
channels from the NVLink fabric probe (probes/nvlink_fabric.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.checks.context import ActiveContext
from nodecheck.checks.gpu import GPU, gpu_facts
from nodecheck.checks.services import UID_MIN
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict
from nodecheck.core.registry import Captures, check
from nodecheck.parsers.gpu import Gpu, GpuFacts
from nodecheck.parsers.nvlink_fabric import FabricNode, parse_nvlink_fabric
from nodecheck.probes.nvlink_fabric import (
    FABRIC_MANAGER_COMM,
    FABRIC_MANAGER_UNIT,
    IMEX_CHANNEL_DIR,
    IMEX_COMM,
    IMEX_UNIT,
    NVLINK_FABRIC,
)

Verdicts = Iterator[tuple[tuple[str, ...], Verdict]]
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def _source(facts: GpuFacts) -> str:
    return "NVML" if facts.source == "nvml" else "nvidia-smi"


def _fabric_words(gpu: Gpu) -> str:
    f = gpu.fabric
    if f is None:
        return "not reported"
    status = f", status {f.status}" if f.status and f.status != "success" else ""
    return f"{f.state or 'state unknown'}{status}"


# ---- nvlink.fabric ----------------------------------------------------------------------------


class NvlinkFabric(BaseModel):
    """What the node's NVLink fabric must show."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fabric_manager: Literal["auto", "required", "ignore"] = Field(
        "auto",
        description="nvidia-fabricmanager must be active: auto = where NVSwitches are visible on the PCI bus or "
        "to the nvswitch driver (HGX A100/H100/H200); required = always (HGX B200/B300: their NVSwitches sit "
        "behind a ConnectX-7 bridge and are not visible); ignore = not judged (GB200/GB300 compute trays: "
        "the switch trays run it)",
    )
    gpu_fabric: Literal["auto", "required", "ignore"] = Field(
        "auto",
        description="every GPU's fabric registration (NVML GpuFabricInfo / nvidia-smi -q Fabric) must be "
        "completed with status success: auto = where Fabric Manager is required or the GPU reports it; "
        "required = a GPU that does not report it is an ERROR (GB200/GB300, HGX H100 and later)",
    )
    nvswitches: int | None = Field(
        None,
        ge=0,
        strict=True,
        description="NVSwitches the host must see (lspci / nvswitch driver): 6 on HGX A100, 4 on HGX H100/H200; "
        "unset: not counted",
    )
    active_links_per_gpu: int | None = Field(
        None,
        ge=0,
        strict=True,
        description="active NVLinks every GPU must have: 18 on H100/H200 SXM and B200 (HGX 8-GPU boards), "
        "12 on A100 SXM; unset: not counted",
    )


@check("nvlink.fabric", probes=[GPU, NVLINK_FABRIC], params=NvlinkFabric)
def fabric(out: Captures, want: NvlinkFabric) -> Iterator[Verdict]:
    """NVSwitch systems have Fabric Manager running and every GPU registered in the NVLink fabric
    (state completed, status success), the expected NVSwitches and active NVLinks per GPU."""
    facts = gpu_facts(out)
    try:
        node = parse_nvlink_fabric(out[NVLINK_FABRIC.name].stdout)
    except ParseError as e:
        yield Verdict(Status.ERROR, f"cannot read the NVLink fabric probe: {e.reason}", excerpt=e.excerpt)
        return
    switches = _switches(node)
    yield from _switch_verdicts(node, switches, want)
    fm_needed = want.fabric_manager == "required" or (want.fabric_manager == "auto" and bool(switches))
    fm_down = False
    if want.fabric_manager == "auto" and not switches and node.nvswitch_pci is None:
        # no switch seen, but lspci did not answer: "not required" would be a guess
        yield Verdict(
            Status.ERROR,
            f"cannot tell whether this node has NVSwitches: {node.lspci_note}, and the nvidia-nvswitch driver "
            f"lists none; {FABRIC_MANAGER_UNIT} not judged (set fabric_manager: required or ignore)",
            FABRIC_MANAGER_UNIT,
            {"lspci": node.lspci_note},
        )
    elif want.fabric_manager != "ignore":
        for v in _fabric_manager(node, facts, fm_needed, switches):
            fm_down = fm_down or v.status is Status.FAIL
            yield v
    if want.gpu_fabric != "ignore":
        # with Fabric Manager down, its verdict names every GPU's unfinished registration (its
        # consequence): one reason, not one more per GPU
        yield from _gpu_fabric(facts, want.gpu_fabric == "required" or fm_needed, unfinished_said=fm_down)
    if want.active_links_per_gpu is not None:
        yield from _links(facts, want.active_links_per_gpu)
    if not facts.gpus:
        yield Verdict(
            Status.FAIL,
            f"no GPU found ({_source(facts)}); nvlink.fabric expects GPUs on this node",
            observed={"gpus": 0, "source": facts.source},
        )


def _switches(node: FabricNode) -> list[str]:
    """The NVSwitches the host sees, by PCI address: lspci's, else the nvswitch driver's."""
    if node.nvswitch_pci:
        return [d.address for d in node.nvswitch_pci]
    if node.nvswitch_driver:
        return list(node.nvswitch_driver)
    return list(node.nvswitch_devices)


def _switch_verdicts(node: FabricNode, switches: list[str], want: NvlinkFabric) -> Iterator[Verdict]:
    observed = {
        "nvswitches": len(switches),
        "pci": [d.address for d in node.nvswitch_pci or ()],
        "driver": list(node.nvswitch_driver),
        "device_nodes": list(node.nvswitch_devices),
    }
    if node.nvswitch_pci is not None and node.nvswitch_driver:
        # the driver lists some switches but not one lspci sees: that switch was not probed (or
        # failed its probe) and Fabric Manager cannot configure it
        unbound = [d.address for d in node.nvswitch_pci if d.address not in node.nvswitch_driver]
        if unbound:
            yield Verdict(
                Status.FAIL,
                f"NVSwitch {', '.join(unbound)} on the PCI bus but not in /proc/driver/nvidia-nvswitch/devices "
                f"(the nvidia-nvswitch driver lists {', '.join(node.nvswitch_driver)})",
                "nvswitch",
                observed,
            )
    for d in node.nvswitch_pci or ():
        if "(rev ff)" in d.name:  # config space reads all ones: the device stopped answering
            yield Verdict(
                Status.FAIL, f"NVSwitch {d.address} reads as rev ff: not responding on the PCI bus", d.address, observed
            )
    if want.nvswitches is None:
        return
    if node.nvswitch_pci is None and not node.nvswitch_driver and want.nvswitches:
        yield Verdict(
            Status.ERROR,
            f"cannot count NVSwitches: {node.lspci_note or 'lspci not read'} and the nvidia-nvswitch driver lists none",
            "nvswitch",
            observed,
            {"nvswitches": want.nvswitches},
        )
        return
    if len(switches) != want.nvswitches:
        listed = ", ".join(switches) or "none"
        yield Verdict(
            Status.FAIL,
            f"{len(switches)} NVSwitches visible ({listed}), expected {want.nvswitches}",
            "nvswitch",
            observed,
            {"nvswitches": want.nvswitches},
        )
    else:
        yield Verdict(Status.PASS, f"{len(switches)} NVSwitches visible", "nvswitch", observed)


def _gpu_states(facts: GpuFacts) -> str:
    states = Counter(_fabric_words(g) for g in facts.gpus)
    if not states:
        return "no GPU"
    if len(states) == 1:
        return f"GPU fabric state {next(iter(states))} on all {len(facts.gpus)} GPUs"
    return "GPU fabric state " + ", ".join(
        f"{state} on {','.join(g.label for g in facts.gpus if _fabric_words(g) == state)}" for state in states
    )


def _fabric_manager(node: FabricNode, facts: GpuFacts, needed: bool, switches: list[str]) -> Iterator[Verdict]:
    subject = FABRIC_MANAGER_UNIT
    if not needed:
        yield Verdict(
            Status.PASS,
            f"{FABRIC_MANAGER_UNIT}: not required, no NVSwitch visible on this node "
            "(lspci, /dev/nvidia-nvswitchN, /proc/driver/nvidia-nvswitch/devices)",
            subject,
            {"nvswitches": 0},
        )
        return
    why = f"{len(switches)} NVSwitches" if switches else "the playbook requires it"
    running, words, observed = _service(node, FABRIC_MANAGER_UNIT, FABRIC_MANAGER_COMM, "nv-fabricmanager")
    if running is None:
        yield Verdict(Status.ERROR, f"cannot tell whether {FABRIC_MANAGER_UNIT} runs: {words}", subject, observed)
    elif running:
        yield Verdict(Status.PASS, f"{words} ({why})", subject, observed)
    else:
        yield Verdict(
            Status.FAIL,
            f"{words}; NVSwitch GPUs need it ({why}): {_gpu_states(facts)}",
            subject,
            {**observed, "running": False},  # what a remediation ladder for Fabric Manager matches on
            {"running": True},
        )


def _service(node: FabricNode, unit: str, comm: str, process: str) -> tuple[bool | None, str, dict]:
    """Whether the unit runs (None: cannot tell), in words, and what was seen."""
    if node.systemd:
        state = node.unit(unit)
        if state is None:
            return None, node.units_note or f"{unit} not in systemctl show output", {"judged_by": "systemd"}
        since = f" since {state.active_enter}" if state.active_enter else ""
        observed: dict[str, object] = {
            "active_state": state.active_state,
            "sub_state": state.sub_state,
            "judged_by": "systemd",
        }
        if state.active:
            return True, f"{unit} {state.state}{since}", observed
        if state.load_state == "not-found":
            # the GPU Operator runs Fabric Manager inside its driver container, not as a host unit
            # (NVSentinel #883): a root process of that name in another mount namespace of this
            # host (processes share the PID namespace) is that daemon
            contained = [p for p in node.processes if p.comm == comm and p.namespace == "other" and p.uid == 0]
            if contained:
                pids = ", ".join(str(p.pid) for p in contained)
                observed["processes"] = [p.pid for p in contained]
                return (
                    True,
                    f"{process} running in a container (pid {pids}; {unit} not installed on the host)",
                    observed,
                )
            return False, f"{unit} not installed (LoadState=not-found)", observed
        result = f", Result={state.result}" if state.result and state.result != "success" else ""
        return False, f"{unit} is {state.active_state} ({state.sub_state}{result})", observed
    here = [p for p in node.processes if p.comm == comm and p.namespace == "same"]
    mine = [p for p in here if p.uid is not None and p.uid < UID_MIN]
    unknown = [p for p in node.processes if p.comm == comm and p.namespace == "unknown"]
    observed = {"processes": [p.pid for p in mine], "judged_by": "process list"}
    if mine:
        return True, f"{process} running (pid {', '.join(str(p.pid) for p in mine)}; no systemd)", observed
    if unknown:
        return (
            None,
            f"{len(unknown)} {process} process(es) whose mount namespace could not be read (not root?)",
            observed,
        )
    users = " (only as a user account: not the daemon)" if here else ""
    return False, f"{unit} not running: no {process} process of root or a system account{users} (no systemd)", observed


def _gpu_fabric(facts: GpuFacts, required: bool, unfinished_said: bool = False) -> Iterator[Verdict]:
    for gpu in facts.gpus:
        g, f = gpu.label, gpu.fabric
        if f is None or f.state is None:
            if required:
                yield Verdict(
                    Status.ERROR,
                    f"{g}: fabric state not reported by {_source(facts)} (NVML GpuFabricInfo / nvidia-smi -q "
                    "Fabric; driver 550+ on Hopper and later); the playbook requires it",
                    g,
                    {"fabric": None, "source": facts.source},
                )
            continue
        observed = {
            "state": f.state,
            "status": f.status,
            "cluster_uuid": f.cluster_uuid,
            "clique_id": f.clique_id,
            "health": dict(f.health),
        }
        if f.state == "not_supported":
            if required:
                yield Verdict(
                    Status.FAIL,
                    f"{g}: fabric state not_supported, expected completed (the playbook requires NVLink fabric "
                    "registration)",
                    g,
                    observed,
                    {"state": "completed"},
                )
            continue
        if f.state in ("not_started", "in_progress") and unfinished_said:
            continue
        if f.state != "completed":
            hint = {
                "not_started": " (Fabric Manager has not registered it)",
                "in_progress": " (registration still running)",
            }
            yield Verdict(
                Status.FAIL,
                f"{g}: fabric state {f.state}{hint.get(f.state, '')}, expected completed with status success",
                g,
                observed,
                {"state": "completed", "status": "success"},
            )
        elif f.status != "success":
            yield Verdict(
                Status.FAIL,
                f"{g}: fabric registration completed with status {f.status or 'not reported'}, expected success",
                g,
                observed,
                {"status": "success"},
            )
        elif bad_health := _unhealthy(f.health):
            worst_status = Status.FAIL if any(status is Status.FAIL for _, _, status in bad_health) else Status.WARN
            yield Verdict(
                worst_status,
                f"{g}: fabric health "
                + ", ".join(f"{key} {value}" for key, value, _ in bad_health)
                + " (expected "
                + ", ".join(f"{key} {HEALTH_RULES[key][0]}" for key, _, _ in bad_health)
                + ")",
                g,
                observed,
                {"health": {key: HEALTH_RULES[key][0] for key, _, _ in bad_health}},
            )
        else:
            yield Verdict(Status.PASS, f"{g}: fabric completed, status success", g, observed)


# The fabric's health words (NVML GpuFabricInfoV healthMask / healthSummary, nvidia-smi -q "Fabric /
# Health", snake-cased by the GPU parsers): the healthy word, and the status of any other. nvml.h
# NVML_GPU_FABRIC_HEALTH_MASK_*: a degraded bandwidth, an unhealthy route or an incorrect
# configuration cost the job NVLink bandwidth or reachability (FAIL); a route recovery or access
# timeout recovery in progress is the fabric repairing itself (WARN: re-check); a GPU without the
# global fabric manager's connection cannot be re-partitioned (WARN). Words a GPU does not report
# (N/A, not supported) are absent and not judged.
HEALTH_RULES: dict[str, tuple[str, Status]] = {
    "summary": ("healthy", Status.FAIL),
    "bandwidth": ("full", Status.FAIL),
    "route_unhealthy": ("false", Status.FAIL),
    "incorrect_configuration": ("none", Status.FAIL),
    "route_recovery_in_progress": ("false", Status.WARN),
    "access_timeout_recovery": ("false", Status.WARN),
    "gfm_state": ("connected", Status.WARN),
}


def _unhealthy(health: tuple[tuple[str, str], ...]) -> list[tuple[str, str, Status]]:
    return [
        (key, value, HEALTH_RULES[key][1])
        for key, value in health
        if key in HEALTH_RULES and value != HEALTH_RULES[key][0]
    ]


def _links(facts: GpuFacts, expected: int) -> Iterator[Verdict]:
    for gpu in facts.gpus:
        g = gpu.label
        if gpu.nvlinks is None:
            yield Verdict(
                Status.ERROR,
                f"{g}: NVLink state not reported by {_source(facts)}, expected {expected} active links",
                g,
                expected={"nvlinks_active": expected},
            )
            continue
        active = [link.link for link in gpu.nvlinks if link.active]
        down = [link.link for link in gpu.nvlinks if link.active is False]
        unknown = [link.link for link in gpu.nvlinks if link.active is None]
        observed = {"nvlinks_active": len(active), "nvlinks_down": down, "nvlinks_unknown": unknown}
        if len(active) >= expected:
            yield Verdict(Status.PASS, f"{g}: {len(active)} NVLinks active", g, observed)
            continue
        listed = f" (down: {', '.join(map(str, down))})" if down else ""
        listed += f" (state unknown: {', '.join(map(str, unknown))})" if unknown else ""
        status = Status.FAIL if not unknown or len(active) + len(unknown) < expected else Status.ERROR
        yield Verdict(
            status,
            f"{g}: {len(active)} NVLinks active, expected {expected}{listed}",
            g,
            observed,
            {"nvlinks_active": expected},
        )


# ---- nvlink.domain ----------------------------------------------------------------------------


class NvlinkDomain(BaseModel):
    """Which nodes must share one NVLink domain, and whether IMEX is judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    group_label: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="inventory label naming a node's NVLink domain: 'nvl_domain' reads labels like "
        "nvl_domain=rack7 (or nvl_domain:rack7); each group must be one domain. Unset: all nodes given are one",
    )
    imex: Literal["required", "ignore"] = Field(
        "ignore",
        description="required: nvidia-imex must run and an IMEX channel device (/dev/nvidia-caps-imex-channels/"
        "channelN) exist on every node (multi-node NVLink jobs); ignore: not judged (per-node tools false-flag "
        "IMEX on single-node or idle GB300 nodes, NVSentinel #1471)",
    )


@check("nvlink.domain", probes=[GPU, NVLINK_FABRIC], params=NvlinkDomain, scope="active")
def domain(ctx: ActiveContext, want: NvlinkDomain) -> Verdicts:
    """The nodes that must share one NVLink domain (all nodes given, or each group of an inventory
    label such as nvl_domain) report one ClusterUUID and one non-zero CliqueId on every GPU; a node
    outside its group's domain is named. IMEX is judged where the playbook requires it."""
    keys: dict[str, tuple[str, int]] = {}  # node -> its one (ClusterUUID, CliqueId)
    groups: dict[str, list[str]] = {}
    for node in ctx.nodes:
        group: str | None = ""
        if want.group_label is not None:
            group = _label(ctx.nodes[node].labels, want.group_label)
            if group is None:
                yield (
                    (node,),
                    Verdict(
                        Status.ERROR,
                        f"no inventory label {want.group_label}=<domain> on this node: its NVLink domain is unknown",
                        observed={"labels": sorted(ctx.nodes[node].labels)},
                    ),
                )
                continue
        captures = ctx.captures.get(node, {})
        try:
            facts = gpu_facts(captures)
        except (ParseError, KeyError) as e:
            reason = e.reason if isinstance(e, ParseError) else "no GPU probe output"
            yield (node,), Verdict(Status.ERROR, f"cannot read the GPU probe: {reason}")
            continue
        if want.imex == "required":
            yield from (((node,), v) for v in _imex(captures))
        key, problem = _node_domain(facts)
        if problem is not None:
            yield (node,), problem
            continue
        assert key is not None
        keys[node] = key
        groups.setdefault(group or "", []).append(node)
    for group, members in groups.items():
        yield from _judge_group(group, members, keys, want)


def _label(labels: frozenset[str], name: str) -> str | None:
    for lab in sorted(labels):
        for sep in ("=", ":"):
            if lab.startswith(name + sep):
                return lab[len(name) + 1 :]
    return None


def _node_domain(facts: GpuFacts) -> tuple[tuple[str, int] | None, Verdict | None]:
    """The node's one (ClusterUUID, CliqueId), or the verdict that says why it has none."""
    if not facts.gpus:
        return None, Verdict(Status.FAIL, f"no GPU found ({_source(facts)}); nvlink.domain expects GPUs")
    unregistered = [g for g in facts.gpus if g.fabric is None or g.fabric.state != "completed"]
    if unregistered:
        missing = [g for g in unregistered if g.fabric is None or g.fabric.state is None]
        status = Status.ERROR if len(missing) == len(unregistered) else Status.FAIL
        listed = "; ".join(f"{g.label} {_fabric_words(g)}" for g in unregistered)
        return None, Verdict(
            status,
            f"NVLink fabric not completed ({listed}, by {_source(facts)}): the node is in no NVLink domain",
            observed={"fabric": {g.label: _fabric_words(g) for g in unregistered}},
            expected={"state": "completed"},
        )
    seen = {g.label: (g.fabric.cluster_uuid, g.fabric.clique_id) for g in facts.gpus if g.fabric}
    zero = [label for label, (_, clique) in seen.items() if not clique]
    if zero:
        return None, Verdict(
            Status.FAIL,
            f"CliqueId 0 on {', '.join(zero)}: not in an NVLink partition, expected a non-zero CliqueId",
            observed={"clique_id": {label: clique for label, (_, clique) in seen.items()}},
            expected={"clique_id": "!= 0"},
        )
    no_uuid = [label for label, (uuid, _) in seen.items() if not uuid]
    if no_uuid:
        return None, Verdict(Status.ERROR, f"ClusterUUID not reported by {_source(facts)} for {', '.join(no_uuid)}")
    distinct = Counter(seen.values())
    if len(distinct) > 1:
        parts = "; ".join(
            f"{','.join(label for label, k in seen.items() if k == key)}: ClusterUUID {key[0]} CliqueId {key[1]}"
            for key in distinct
        )
        return None, Verdict(
            Status.FAIL,
            f"the node's GPUs are in {len(distinct)} NVLink domains/cliques ({parts}), expected one",
            observed={"domains": {label: list(k) for label, k in seen.items()}},
        )
    key = next(iter(distinct))
    return (str(key[0]), int(key[1])), None  # type: ignore[arg-type]  # None ruled out above


def _judge_group(group: str, members: list[str], keys: Mapping[str, tuple[str, int]], want: NvlinkDomain) -> Verdicts:
    where = f"{want.group_label}={group}" if want.group_label else "the nodes given"
    votes = Counter(keys[n] for n in members)
    top, count = votes.most_common(1)[0]
    zero_uuid = [n for n in members if keys[n][0] == ZERO_UUID]
    if len(members) > 1 and zero_uuid:
        for n in zero_uuid:
            yield (
                (n,),
                Verdict(
                    Status.FAIL,
                    f"ClusterUUID {ZERO_UUID} (a single-node fabric) in {where}, which has {len(members)} nodes: "
                    "expected the rack's NVLink domain",
                    observed={"cluster_uuid": keys[n][0], "clique_id": keys[n][1]},
                ),
            )
        members = [n for n in members if n not in zero_uuid]
        if not members:
            return
        votes = Counter(keys[n] for n in members)
        top, count = votes.most_common(1)[0]
    if len(votes) == 1:
        yield (
            tuple(members),
            Verdict(
                Status.PASS,
                f"one NVLink domain in {where}: ClusterUUID {top[0]} CliqueId {top[1]} ({len(members)} nodes)",
                observed={"cluster_uuid": top[0], "clique_id": top[1], "nodes": len(members)},
            ),
        )
        return
    if count * 2 <= len(members):  # no strict majority: which side is wrong cannot be told
        sides = "; ".join(
            f"{', '.join(sorted(n for n in members if keys[n] == k))}: ClusterUUID {k[0]} CliqueId {k[1]}"
            for k, _ in votes.most_common()
        )
        yield (
            tuple(members),
            Verdict(
                Status.FAIL,
                f"{where} splits into {len(votes)} NVLink domains with no majority ({sides}); expected one",
                observed={"domains": {n: list(keys[n]) for n in members}},
            ),
        )
        return
    majority = [n for n in members if keys[n] == top]
    yield (
        tuple(majority),
        Verdict(
            Status.PASS,
            f"in the majority NVLink domain of {where}: ClusterUUID {top[0]} CliqueId {top[1]} "
            f"({len(majority)} of {len(members)} nodes)",
            observed={"cluster_uuid": top[0], "clique_id": top[1]},
        ),
    )
    for n in members:
        if keys[n] == top:
            continue
        uuid, clique = keys[n]
        what = "CliqueId" if uuid == top[0] else "ClusterUUID"
        yield (
            (n,),
            Verdict(
                Status.FAIL,
                f"outside {where}'s NVLink domain: ClusterUUID {uuid} CliqueId {clique}, expected ClusterUUID "
                f"{top[0]} CliqueId {top[1]} ({len(majority)} of {len(members)} nodes; differs in {what})",
                observed={"cluster_uuid": uuid, "clique_id": clique},
                expected={"cluster_uuid": top[0], "clique_id": top[1]},
            ),
        )


def _imex(captures: Mapping) -> Iterator[Verdict]:
    capture = captures.get(NVLINK_FABRIC.name)
    if capture is None:
        yield Verdict(Status.ERROR, "IMEX not judged: no NVLink fabric probe output", IMEX_UNIT)
        return
    try:
        node = parse_nvlink_fabric(capture.stdout)
    except ParseError as e:
        yield Verdict(Status.ERROR, f"cannot read the NVLink fabric probe: {e.reason}", IMEX_UNIT, excerpt=e.excerpt)
        return
    running, words, observed = _service(node, IMEX_UNIT, IMEX_COMM, "nvidia-imex")
    channels = list(node.imex_channels)
    observed = {**observed, "channels": channels}
    if running is None:
        yield Verdict(Status.ERROR, f"cannot tell whether {IMEX_UNIT} runs: {words}", IMEX_UNIT, observed)
    elif not running:
        yield Verdict(
            Status.FAIL, f"{words}; multi-node NVLink jobs need IMEX (playbook: imex required)", IMEX_UNIT, observed
        )
    if not channels:
        yield Verdict(
            Status.FAIL,
            f"no IMEX channel device in {IMEX_CHANNEL_DIR}/ (expected channel0 or more: a multi-node NVLink job "
            "cannot import memory without one)",
            IMEX_UNIT,
            observed,
            {"channels": ">= 1"},
        )
    elif running:
        yield Verdict(
            Status.PASS,
            f"{words}; IMEX channels: {', '.join(c.rsplit('/', 1)[-1] for c in channels)}",
            IMEX_UNIT,
            observed,
        )
