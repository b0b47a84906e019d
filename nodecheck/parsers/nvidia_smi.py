"""GpuFacts from nvidia-smi's outputs together: the `--query-gpu` CSV's GPUs filled in from `-q`, with
processes from `--query-compute-apps`, links from `nvlink -s` and their error counters from `nvlink -e`.
Each output form has its own parser: nvidia_smi_csv.py, nvidia_smi_q.py, nvidia_smi_nvlink.py."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import replace

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.gpu import Gpu, GpuFacts, GpuProcess, NvLink
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_csv import QUERY_GPU_FIELDS, gpus_from_query_gpu, parse_compute_apps, parse_query_gpu
from nodecheck.parsers.nvidia_smi_nvlink import parse_nvlink_errors, parse_nvlink_status
from nodecheck.parsers.nvidia_smi_q import parse_q
from nodecheck.parsers.nvidia_smi_values import grouped


def gpu_facts_from_nvidia_smi(
    *,
    query_gpu: str | None,
    compute_apps: str | None,
    q: str | None,
    nvlink: str | None,
    note: str = "",
    nvlink_errors: str | None = None,
    clock: tuple[float | None, float | None, str | None] = (None, None, None),
) -> GpuFacts:
    """GpuFacts from nvidia-smi's outputs: the CSV's GPUs, filled in from `-q` (matched by PCI bus id,
    else by index), with processes from the compute-apps CSV, links from `nvlink -s` and their error
    counters from `nvlink -e`; `clock` is the read's (wall clock, uptime, boot id)."""
    if query_gpu is None and q is None:
        raise ParseError("nvidia-smi", "neither --query-gpu nor -q output to read")
    gaps: list[str] = []
    driver = cuda = None
    csv_had_driver = False
    # real stdout ends with a newline; a capture without one was cut, and its last CSV value may be
    # a cut number ("1" of "16") that no column count can catch
    for name, text in (
        ("--query-gpu", query_gpu),
        ("--query-compute-apps", compute_apps),
        ("nvlink -s", nvlink),
        ("nvlink -e", nvlink_errors),
    ):
        if text and text.strip() and not text.endswith("\n"):
            last = split_lines(text)[-1].strip()
            raise ParseError(f"nvidia-smi {name}", f"output ends mid-line: {quote(last)}", text)
    if query_gpu is not None:
        rows = parse_query_gpu(query_gpu, QUERY_GPU_FIELDS)
        gpus = list(gpus_from_query_gpu(query_gpu))
        drivers = sorted({version for row in rows if (version := row.get("driver_version"))})
        csv_had_driver = bool(drivers)
        if len(drivers) > 1:
            gaps.append(f"GPUs report different driver versions: {', '.join(drivers)}")
        driver = drivers[0] if len(drivers) == 1 else None
    q_facts = parse_q(q) if q is not None else None
    if q_facts is not None:
        gaps += [f"nvidia-smi -q: {gap}" for gap in q_facts.gaps]
        cuda = q_facts.cuda_version
        if not csv_had_driver:  # GPUs that disagree stay unknown, not -q's pick
            driver = q_facts.driver_version
        gpus = list(q_facts.gpus) if query_gpu is None else _merge_q(gpus, q_facts.gpus, gaps)
    if compute_apps is not None:
        gpus = _attach_processes(gpus, parse_compute_apps(compute_apps), gaps)
    if nvlink is not None:
        links = parse_nvlink_status(nvlink)
        for gpu_index in sorted(set(links) - {gpu.index for gpu in gpus}):
            gaps.append(f"nvlink -s lists GPU{gpu_index}, which the GPU query does not")
        gaps += [f"{gpu.label} nvlinks: not listed by nvlink -s" for gpu in gpus if gpu.index not in links]
        gpus = [replace(gpu, nvlinks=links.get(gpu.index)) for gpu in gpus]
    if nvlink_errors is not None:
        gpus = _attach_link_errors(gpus, parse_nvlink_errors(nvlink_errors), gaps)
    for gpu in gpus:
        if gpu.remapped_rows is None:
            gaps.append(f"{gpu.label} remapped rows: {'not reported' if q is not None else 'no -q output'}")
        if gpu.ecc_uncorrectable_volatile is None:
            gaps.append(f"{gpu.label} volatile uncorrectable ECC: not reported")
    return GpuFacts("nvidia-smi", driver, cuda, tuple(gpus), note, tuple(gaps), *clock)


def _attach_link_errors(
    gpus: Sequence[Gpu], errors: dict[int, dict[int, tuple[tuple[str, int], ...]]], gaps: list[str]
) -> list[Gpu]:
    """Each link's counters from `nvlink -e` onto the links `nvlink -s` listed (by GPU index and link
    number); a link -e does not list keeps errors None. Without `nvlink -s` the links are -e's, their
    state unknown."""
    for gpu_index in sorted(set(errors) - {gpu.index for gpu in gpus}):
        gaps.append(f"nvlink -e lists GPU{gpu_index}, which the GPU query does not")
    result = []
    for gpu in gpus:
        counted = errors.get(gpu.index)
        if counted is None:
            result.append(gpu)
            continue
        if gpu.nvlinks is None:
            links = tuple(NvLink(link, None, errors=counts) for link, counts in sorted(counted.items()))
        else:
            known = {link.link for link in gpu.nvlinks}
            for link in sorted(set(counted) - known):
                gaps.append(f"{gpu.label} nvlink -e lists link {link}, which nvlink -s does not")
            links = tuple(replace(link, errors=counted.get(link.link)) for link in gpu.nvlinks)
        result.append(replace(gpu, nvlinks=links))
    return result


def _merge_q(gpus: Sequence[Gpu], q_gpus: Sequence[Gpu], gaps: list[str]) -> list[Gpu]:
    by_bus = {g.pci_bus_id: g for g in q_gpus if g.pci_bus_id is not None}
    by_index = grouped((g.index, g) for g in q_gpus)
    used: set[int] = set()
    merged = []
    for gpu in gpus:
        match = by_bus.get(gpu.pci_bus_id) if gpu.pci_bus_id is not None else None
        if match is None:
            # by index only where a bus id cannot decide: one side lacks it (a headless -q excerpt)
            match = next(
                (g for g in by_index.get(gpu.index, ()) if g.pci_bus_id is None or gpu.pci_bus_id is None), None
            )
        if match is None:
            merged.append(gpu)
            continue
        used.add(id(match))
        merged.append(_fill(gpu, match))
    for g in q_gpus:
        if id(g) not in used:
            gaps.append(f"nvidia-smi -q shows GPU {g.pci_bus_id or g.index}, which --query-gpu does not")
    return merged


def _fill(base: Gpu, extra: Gpu) -> Gpu:
    """`base` with each fact it lacks taken from `extra`; a fact both have keeps base's value."""
    changes = {
        f.name: getattr(extra, f.name)
        for f in dataclass_fields(Gpu)
        if f.name != "index" and getattr(base, f.name) is None and getattr(extra, f.name) is not None
    }
    return replace(base, **changes)


def _attach_processes(gpus: Iterable[Gpu], apps: Sequence[tuple[str, GpuProcess]], gaps: list[str]) -> list[Gpu]:
    gpus = list(gpus)
    if any(uuid == "" for uuid, _ in apps):
        gaps.append("compute apps without gpu_uuid: processes not attributed to GPUs")
        return [replace(gpu, processes=None) for gpu in gpus]
    known = {gpu.uuid for gpu in gpus if gpu.uuid}
    for uuid, process in apps:
        if uuid not in known:
            gaps.append(f"compute app pid {process.pid} on {uuid}, which the GPU query does not show")
    by_uuid = grouped(apps)
    result = []
    for gpu in gpus:
        if gpu.uuid is None:
            gaps.append(f"{gpu.label} processes: no uuid to match compute apps by")
            result.append(replace(gpu, processes=None))
        else:
            result.append(replace(gpu, processes=tuple(by_uuid.get(gpu.uuid, ()))))
    return result
