"""nccl-tests' `-J/--output_file FILE.json` report (src/util.cu, JSON_FILE_VERSION 1-3) in, an NcclTestRun out."""

from __future__ import annotations

import json
import math
import reprlib
from dataclasses import replace
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.parsers import jsonsafe
from nodecheck.parsers.nccl_tests_facts import (
    NOT_FINITE,
    TOOL,
    TWO_RUNS,
    Failure,
    Measurement,
    NcclTestRun,
    RankDevice,
    SizeRow,
    TestParams,
    Unreadable,
    avg_busbw_failure,
    int_or_none,
    out_of_bounds_failure,
)

_JSON_CONFIG_NAMED = {
    "nthreads",
    "ngpus",
    "minimum_bytes",
    "maximum_bytes",
    "step_factor",
    "step_bytes",
    "warmup_iters",
    "iterations",
    "aggregated_iterations",
    "validation",
    "graph",
    "devices",
}


def parse_nccl_tests_json(text: str) -> NcclTestRun:
    """nccl-tests' JSON report (-J FILE, JSON_FILE_VERSION 2 in src/util.cu)."""
    try:
        document = jsonsafe.loads(text, finite_numbers=False)  # each number is checked where it is read, by name
    except json.JSONDecodeError as cut:
        raise ParseError(TOOL, _json_break(text, cut), text[max(0, cut.pos - 300) : cut.pos + 60]) from None
    except jsonsafe.JsonRefused as why:  # NaN, Infinity, an integer no float holds
        raise ParseError(TOOL, f"JSON report: {why}", text) from None
    except RecursionError:  # json's C decoder stops at the interpreter's depth limit
        raise ParseError(TOOL, "JSON report nested too deeply", text) from None
    if not isinstance(document, dict) or not {"version", "config", "results"} & document.keys():
        raise ParseError(TOOL, "not an nccl-tests JSON report (no version, config or results key)", text)
    try:
        return _json_run(document)
    except Unreadable as why:
        raise ParseError(TOOL, f"JSON report: {why}", text) from None
    except (ValueError, OverflowError, TypeError) as why:  # int(NaN) of a count, a rank, a size
        raise ParseError(TOOL, f"JSON report: a value cannot be read: {reprlib.repr(str(why))}", text) from None


def _json_break(text: str, cut: json.JSONDecodeError) -> str:
    """Where a report written by a process that died stops: the position and the section."""
    if not text.strip():
        return "empty JSON report"
    before = text[: cut.pos]
    if '"results"' in before and '"out_of_bounds"' not in before:
        rows = before.count('"experiment_name"')  # the last key of every result object
        section = f"inside 'results' after {rows} complete rows"
    elif '"out_of_bounds"' in before:
        section = "in the summary after 'results'"
    elif '"config"' in before:
        section = "inside 'config' (before 'results')"
    else:
        section = "in the preamble (version, args, env)"
    return (
        f"JSON report cut off or malformed at line {cut.lineno} column {cut.colno} "
        f"(character {cut.pos} of {len(text)}), {section}: {cut.msg}"
    )


def _json_run(document: dict) -> NcclTestRun:
    config = _json_object(document, "config")
    devices = config.get("devices", document.get("devices")) or []
    results = document.get("results")
    rows = tuple(
        _json_row(_as_object(row, "results[]"), f"results[{i}]")
        for i, row in enumerate(_as_list(results or [], "results"))
    )
    bounds = _json_object(document, "out_of_bounds")
    average = _json_object(document, "average_bus_bandwidth")
    library = _json_int(document, "nccl_version")
    fields: dict[str, Any] = {}
    if bounds:
        fields.update(out_of_bounds=_json_int(bounds, "count"), out_of_bounds_ok=_json_bool(bounds, "okay"))
    if average:
        fields.update(
            avg_busbw_gbs=_json_float(average, "bandwidth", "average_bus_bandwidth"),
            avg_busbw_ok=_json_bool(average, "okay"),
            concluded=True,
        )
    errors = [e for e in _as_list(document.get("errors") or [], "errors") if isinstance(e, str) and e]
    version = _nccl_version_text(library)
    listed = tuple(_json_device(_as_object(d, "devices[]")) for d in _as_list(devices, "devices"))
    _one_run(listed)
    run = NcclTestRun(
        nccl_library=library,
        nccl_version=version,
        nccl_versions=(version,) if version else (),
        collective=_program(document.get("args")),
        params=_json_params(config) if config else None,
        devices=listed,
        columns=("size", "count", "type", "redop", "root") if results is not None else (),
        rows=rows,
        from_json=True,
        nccl_last_error="; ".join(errors) or None,
        **fields,
    )
    return replace(run, failures=_json_failures(run))


def _json_failures(run: NcclTestRun) -> tuple[Failure, ...]:
    failures = []
    if run.out_of_bounds or run.out_of_bounds_ok is False:
        failures.append(out_of_bounds_failure(run.out_of_bounds or 0))
    if run.avg_busbw_ok is False and run.avg_busbw_gbs is not None:
        failures.append(avg_busbw_failure(run.avg_busbw_gbs))
    return tuple(failures)


def _one_run(devices: tuple[RankDevice, ...]) -> None:
    """util.cu lists one device per process, each rank once: a rank twice is two runs' report."""
    hosts: dict[int, str] = {}
    for device in devices:
        if device.rank in hosts:
            raise Unreadable(
                f"rank {device.rank} is listed twice (on {hosts[device.rank]} and {device.host}): {TWO_RUNS}"
            )
        hosts[device.rank] = device.host


def _json_params(config: dict) -> TestParams:
    factor, step = _json_int(config, "step_factor"), _json_int(config, "step_bytes")
    validation = _json_int(config, "validation")
    extra = {key: str(value) for key, value in config.items() if key not in _JSON_CONFIG_NAMED}
    return TestParams(
        n_threads=_json_int(config, "nthreads"),
        n_gpus=_json_int(config, "ngpus"),
        min_bytes=_json_int(config, "minimum_bytes"),
        max_bytes=_json_int(config, "maximum_bytes"),
        step=f"{factor}(factor)" if factor is not None else f"{step}(bytes)" if step is not None else None,
        warmup_iters=_json_int(config, "warmup_iters"),
        iters=_json_int(config, "iterations"),
        agg_iters=_json_int(config, "aggregated_iterations"),
        validation=None if validation is None else validation > 0,
        graph=_json_int(config, "graph"),
        extra=extra,
    )


def _json_device(device: dict) -> RankDevice:
    return RankDevice(
        rank=_json_int(device, "rank") or 0,
        host=str(device.get("hostname", "")),
        device=_json_int(device, "device") or 0,
        bus_id=str(device.get("device_hex", "")),
        model=str(device.get("device_info", "")),
        pid=_json_int(device, "pid"),
        group=_json_int(device, "group"),
    )


def _json_row(row: dict, where: str) -> SizeRow:
    root = row.get("root")  # written as the printed column: "    -1"
    if isinstance(root, str):
        root = int_or_none(root.strip())
    elif not isinstance(root, int) or isinstance(root, bool):
        root = None
    redop = row.get("redop")
    return SizeRow(
        size=_json_int(row, "size") or 0,
        count=_json_int(row, "count") or 0,
        dtype=str(row.get("type", "")),
        redop=redop if isinstance(redop, str) else None,
        root=root,
        out_of_place=_json_measurement(row.get("out_of_place"), f"{where} out_of_place"),
        in_place=_json_measurement(row.get("in_place"), f"{where} in_place"),
    )


def _json_measurement(half: Any, where: str) -> Measurement | None:
    if half is None:
        return None
    half = _as_object(half, "out_of_place/in_place")
    time = _json_float(half, "time", where) if "time" in half else _json_float(half, "cpu_time", where)
    wrong = _json_float(half, "nwrong", where)
    return Measurement(
        time,
        _json_float(half, "alg_bw", where),
        _json_float(half, "bus_bw", where),
        wrong=None if wrong is None else round(wrong),
    )


def _json_object(document: dict, key: str) -> dict:
    value = document.get(key)
    return {} if value is None else _as_object(value, key)


def _as_object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise Unreadable(f"{what} is not an object: {reprlib.repr(value)}")
    return value


def _as_list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise Unreadable(f"{what} is not a list: {reprlib.repr(value)}")
    return value


def _json_int(obj: dict, key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise Unreadable(f"{key} is not an integer: {reprlib.repr(value)}")
    return int(value)


def _json_float(obj: dict, key: str, where: str = "") -> float | None:
    """jsonDouble writes '%lf', and NaN as the string "nan"; Python's json reads NaN and Infinity
    too. A measurement that is not finite is not one: NaN passes every floor."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unreadable(f"{key} is not a number: {reprlib.repr(value)}")
    if not math.isfinite(value):
        raise Unreadable(f"{where + ' ' if where else ''}{key} is not a finite number ({value}): {NOT_FINITE}")
    return float(value)


def _json_bool(obj: dict, key: str) -> bool | None:
    """jsonBool writes the strings "true"/"false"; the average's "okay" may be "unchecked"."""
    value = obj.get(key)
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(value) if isinstance(value, str) else None


def _program(args: Any) -> str | None:
    if not isinstance(args, list) or not args or not isinstance(args[0], str):
        return None
    return args[0].rsplit("/", 1)[-1] or None


def _nccl_version_text(code: int | None) -> str | None:
    """NCCL_VERSION_CODE 22902 -> "2.29.2"; before 2.9 the code was major*1000+minor*100+patch."""
    if code is None or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
