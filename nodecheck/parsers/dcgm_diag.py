"""`dcgmi diag` output: the JSON of `-j` (DCGM 2.x/3.x "DCGM GPU Diagnostic", 4.x "DCGM Diagnostic"
with entity results) and the text table (3.x "Pass - GPUs: 0, 1" rows, 4.x "GPU0: Pass" rows), read
into one typed report: every test, its per-GPU results, DCGM's own messages and error codes.

Layouts (tests/data/dcgmi-diag, /tmp/sources20/A.md):
- 3.x JSON: {"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"gpu_ids": "0,1" | 0, "status", "warnings": [{"warning", "error_id"} | str], "info": [str] | str}]}]}],
  "version"}}; DCGM's own fixture keeps `null` between tests and a stray line before the document.
- 4.x JSON: {"DCGM Diagnostic": {"test_categories": [... results: [{"entity_group": "GPU", "entity_id": 0,
  ...}], "test_summary": {"status", "info", "warnings"}]}, "metadata": {"version", "Driver Version
  Detected"}}: the test's own status sits in test_summary and can be Fail while every GPU passed.
- Tables: a box of `| name | result |` rows; "Warning"/"Info" rows hard-wrapped at a fixed width (mid
  word); a Metadata section or none (3.0); a run cut short lacks the closing border: the report says
  complete=False and a judge never passes it.
A status word this parser does not know is a ParseError, never read as a pass; so is a row the table
cannot place: a category header closes the test above it (a Warning or GPU row after it, before a test's
name, belongs to a test whose row was lost), and a GPU with two results in one test. GPU ids are at
most MAX_GPU_ID (ASCII digits): a longer digit run is a ParseError, not an int() that raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.parsers.jsonsafe import JsonRefused, loads
from nodecheck.parsers.lines import split_lines

TOOL = "dcgmi diag"
MAX_GPU_ID = 9999  # DCGM numbers GPUs from 0 (DCGM_MAX_NUM_DEVICES is 32): 4 digits are plenty
STATUSES = ("Pass", "Fail", "Warn", "Skip", "Not Run")
_STATUS_WORDS = {
    "pass": "Pass",
    "passed": "Pass",
    "fail": "Fail",
    "failed": "Fail",
    "warn": "Warn",
    "warning": "Warn",
    "skip": "Skip",
    "skipped": "Skip",
    "not run": "Not Run",
    "not_run": "Not Run",
    "notrun": "Not Run",
}
# the name a test has in the output (3.x display names, 4.x plugin names) -> the plugin `-r` runs;
# the 3.x deployment checks (Denylist, NVML Library, ...) all belong to the software plugin
_PLUGINS = {
    "gpu memory": "memory",
    "memory": "memory",
    "pcie": "pcie",
    "diagnostic": "diagnostic",
    "sm stress": "sm_stress",
    "targeted stress": "targeted_stress",
    "targeted power": "targeted_power",
    "memory bandwidth": "memory_bandwidth",
    "memtest": "memtest",
    "pulse test": "pulse_test",
    "eud test": "eud",
    "eud": "eud",
    "cpu eud": "cpu_eud",
    "nvbandwidth": "nvbandwidth",
    "context create": "context_create",
    "software": "software",
}
# "Error: unable to establish a connection to the specified host: localhost" and "Error: Unable to
# connect to host engine. Host engine connection invalid/disconnected." (dcgmi's Command::Connect;
# NVIDIA/DCGM#43, #57, dcgm-exporter#193)
_HOST_ENGINE = re.compile(
    r"^.*(?:unable to establish a connection to the specified host|Unable to connect to host engine"
    r"|Host engine connection invalid/disconnected).*$",
    re.I | re.M,
)


@dataclass(frozen=True)
class Message:
    """One of DCGM's warnings (with its DCGM_FR error id where the JSON gives it) or info lines."""

    text: str
    error_id: int | None = None
    severity: int | None = None  # dcgmErrorSeverity_t: 2 isolate, 4 triage, 5 config, 6 reset
    category: int | None = None  # dcgmErrorCategory_t: 10 hardware memory, 13 PCIe, ...


@dataclass(frozen=True)
class EntityResult:
    """A test's result for one GPU, or for several ("0,1,2": the 3.x deployment rows; () all GPUs)."""

    gpus: tuple[int, ...]
    status: str  # one of STATUSES
    warnings: tuple[Message, ...] = ()
    info: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        if not self.gpus:
            return "all GPUs"
        return ("GPU " if len(self.gpus) == 1 else "GPUs ") + ",".join(str(g) for g in self.gpus)


@dataclass(frozen=True)
class DiagTest:
    category: str  # Deployment, Hardware, Integration, Stress, Custom, ...
    name: str  # as DCGM prints it: "GPU Memory" (3.x), "memory" (4.x)
    plugin: str  # the `-r` name: memory, pcie, software, ...; the lower-cased name where unknown
    status: str | None  # the test's own status (4.x test_summary, the table's name row); None: not given
    results: tuple[EntityResult, ...]
    warnings: tuple[Message, ...] = ()  # test-level (4.x test_summary, the table's Warning rows)
    info: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiagReport:
    layout: str  # "json" or "table"
    tests: tuple[DiagTest, ...]
    dcgm_version: str | None
    driver_version: str | None
    complete: bool  # False: the table stops before its closing border (a run cut short)
    runtime_error: str | None = None  # the JSON's runtime_error: DCGM could not run the tests
    gpus: tuple[int, ...] = ()  # every GPU a result names, sorted

    @property
    def statuses(self) -> set[str]:
        return {s for t in self.tests for s in (t.status, *(r.status for r in t.results)) if s}


def host_engine_error(text: str) -> str | None:
    """dcgmi's own words when it cannot reach nv-hostengine, else None."""
    found = _HOST_ENGINE.findall(text)
    return " ".join(line.strip() for line in found) if found else None


def parse_dcgmi_diag(text: str) -> DiagReport:
    """A `dcgmi diag` output, JSON or table. Raises ParseError on anything else (an error message,
    an unknown layout, JSON cut short)."""
    lines = split_lines(text)
    if any(line.startswith("+===") for line in lines):
        return _parse_table(lines, text)
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is None:
        raise ParseError(TOOL, "neither a JSON document nor a result table", text)
    return _parse_json("\n".join(lines[start:]), text)


# --- JSON -----------------------------------------------------------------------------------------


def _parse_json(doc_text: str, raw: str) -> DiagReport:
    try:
        doc = loads(doc_text)
    except json.JSONDecodeError as e:
        if e.msg.startswith("Extra data"):  # a line after the document (a wrapper's echo)
            try:
                doc = loads(doc_text[: e.pos])
            except (json.JSONDecodeError, JsonRefused, RecursionError) as again:
                raise ParseError(TOOL, f"JSON not readable: {again}", raw) from again
        else:
            raise ParseError(TOOL, f"JSON cut short or malformed ({e.msg} at character {e.pos})", raw) from e
    except (JsonRefused, RecursionError) as e:
        raise ParseError(TOOL, f"JSON not readable: {e}", raw) from e
    if not isinstance(doc, dict):
        raise ParseError(TOOL, "the JSON document is not an object", raw)
    root = doc.get("DCGM GPU Diagnostic", doc.get("DCGM Diagnostic"))
    if not isinstance(root, dict):
        raise ParseError(TOOL, f"no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' object (keys: {sorted(doc)[:6]})", raw)
    found = doc.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    version = _text(root.get("version")) or _text(metadata.get("version"))
    driver = (
        _text(root.get("Driver Version Detected"))
        or _text(root.get("driver_version_detected"))
        or _text(metadata.get("Driver Version Detected"))
    )
    runtime_error = _text(root.get("runtime_error")) or _text(doc.get("runtime_error"))
    categories = root.get("test_categories")
    if categories is None and runtime_error:
        return DiagReport("json", (), version, driver, True, runtime_error)
    if not isinstance(categories, list):
        raise ParseError(TOOL, "no test_categories list", raw)
    tests = []
    for category in categories:
        if category is None:
            continue
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseError(TOOL, f"a test category is not an object with a tests list: {str(category)[:80]}", raw)
        name = _text(category.get("category")) or "?"
        tests += [_json_test(name, t, raw) for t in category["tests"] if t is not None]
    return _report("json", tuple(tests), version, driver, True, runtime_error)


def _json_test(category: str, test: Any, raw: str) -> DiagTest:
    if not isinstance(test, dict) or not isinstance(test.get("name"), str):
        raise ParseError(TOOL, f"a test without a name: {str(test)[:80]}", raw)
    results = test.get("results", [])
    if not isinstance(results, list):
        raise ParseError(TOOL, f"{test['name']}: results is not a list", raw)
    entities = tuple(_json_result(test["name"], r, raw) for r in results if r is not None)
    summary = test.get("test_summary")
    status: str | None = None
    warnings: tuple[Message, ...] = ()
    info: tuple[str, ...] = ()
    if isinstance(summary, dict):
        status = _status(summary.get("status"), test["name"], raw) if "status" in summary else None
        warnings, info = _messages(summary.get("warnings")), _infos(summary.get("info"))
    return DiagTest(category, test["name"], _plugin(test["name"], category), status, entities, warnings, info)


def _json_result(test: str, result: Any, raw: str) -> EntityResult:
    if not isinstance(result, dict):
        raise ParseError(TOOL, f"{test}: a result is not an object", raw)
    gpus: tuple[int, ...] = ()
    if "entity_group" in result and "entity_id" not in result:  # 4.x names every entity: its id was lost
        raise ParseError(TOOL, f"{test}: a {str(result['entity_group'])[:20]} result without its entity_id", raw)
    if "entity_id" in result:
        group = result.get("entity_group", "GPU")
        if group != "GPU":  # a CPU or NVSwitch entity: keep it out of the GPU list, but keep its status
            gpus = ()
        elif isinstance(result["entity_id"], int) and not isinstance(result["entity_id"], bool):
            gpus = (_gpu_id(result["entity_id"], f"{test}: entity_id", raw),)
        else:
            raise ParseError(TOOL, f"{test}: entity_id {str(result['entity_id'])[:40]!r} is not a number", raw)
    elif "gpu_ids" in result:
        gpus = _gpu_list(result["gpu_ids"], test, raw)
    return EntityResult(
        gpus, _status(result.get("status"), test, raw), _messages(result.get("warnings")), _infos(result.get("info"))
    )


def _gpu_list(value: Any, test: str, raw: str) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (_gpu_id(value, f"{test}: gpu_ids", raw),)
    if isinstance(value, str) and _ID_LIST.fullmatch(value):
        return _gpu_ids(value.split(","), f"{test}: gpu_ids", raw)
    if value == "" or value is None:
        return ()
    raise ParseError(TOOL, f"{test}: gpu_ids {str(value)[:40]!r} is not a GPU id list", raw)


_ID_LIST = re.compile(r"\s*[0-9]+(?:\s*,\s*[0-9]+)*\s*")


def _gpu_ids(words: list[str], what: str, raw: str) -> tuple[int, ...]:
    """GPU ids from their ASCII digits, each at most MAX_GPU_ID: the length is checked before int()."""
    ids = []
    for word in (w.strip() for w in words):
        if not (word.isascii() and word.isdigit()):
            raise ParseError(TOOL, f"{what}: {word[:40]!r} is not a GPU id", raw)
        if len(word) > len(str(MAX_GPU_ID)):
            raise ParseError(TOOL, f"{what}: GPU id of {len(word)} digits (at most {MAX_GPU_ID})", raw)
        ids.append(_gpu_id(int(word), what, raw))
    return tuple(ids)


def _gpu_id(value: int, what: str, raw: str) -> int:
    if not 0 <= value <= MAX_GPU_ID:
        raise ParseError(TOOL, f"{what} {str(value)[:40]} is not a GPU id (0 to {MAX_GPU_ID})", raw)
    return value


def _messages(value: Any) -> tuple[Message, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            out.append(
                Message(
                    _text(item.get("warning")) or _text(item.get("message")) or "",
                    _int(item.get("error_id", item.get("error_code"))),
                    _int(item.get("error_severity")),
                    _int(item.get("error_category")),
                )
            )
        elif isinstance(item, str):
            out.append(Message(item))
    return tuple(out)


def _infos(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _status(value: Any, test: str, raw: str) -> str:
    word = _STATUS_WORDS.get(value.strip().lower()) if isinstance(value, str) else None
    if word is None:
        raise ParseError(TOOL, f"{test}: unknown status {str(value)[:40]!r} (not read as a pass)", raw)
    return word


def _plugin(name: str, category: str) -> str:
    key = name.strip().lower()
    if key in _PLUGINS:
        return _PLUGINS[key]
    if category.lower() == "deployment":
        return "software"
    return key.replace(" ", "_")


def _report(
    layout: str,
    tests: tuple[DiagTest, ...],
    version: str | None,
    driver: str | None,
    complete: bool,
    runtime_error: str | None = None,
) -> DiagReport:
    gpus = sorted({g for t in tests for r in t.results for g in r.gpus})
    return DiagReport(layout, tests, version, driver, complete, runtime_error, tuple(gpus))


# --- table ----------------------------------------------------------------------------------------

_BORDER = re.compile(r"^\+-+\+-+\+\s*$")
# on a value already stripped: no lazy group before trailing spaces (that rescans them from every character);
# any word before the colon, so that 'GPU٣: Fail' or a 5000-digit id is refused, not read as message text
_GPU_ROW = re.compile(r"^GPU ?([^\s:]+):\s*(\S.*)$")
_STATUS_ROW = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)(?:\s*-\s*(?:(All)|GPUs?:\s*([0-9,\s]+)))?$", re.I)


@dataclass
class _Test:
    category: str
    name: str
    status: str | None
    results: list[EntityResult]
    messages: list[tuple[str, list[str]]]  # ("Warning" | "Info", wrapped chunks)


def _parse_table(lines: list[str], raw: str) -> DiagReport:
    header = next(i for i, line in enumerate(lines) if line.startswith("+==="))
    # the right column's width, from the header rule: text wraps at width - 3 (a space each side, one
    # spare), hard, mid-word (nccl-tests#264: 'Enabl' / 'e persistence mode')
    cut = lines[header].find("+", 1)
    if cut < 0:
        raise ParseError(TOOL, "table header rule without a column break", raw)
    wrap = len(lines[header].rstrip()) - cut - 5
    meta: dict[str, str] = {}
    category = ""
    tests: list[_Test] = []
    test: _Test | None = None  # the test the next Warning, Info or continuation row belongs to
    complete = False
    rows = [line for line in lines[header + 1 :] if line.strip()]
    for n, line in enumerate(rows):
        if _BORDER.match(line):
            complete = True
            break
        if (name := _section(line, cut)) is not None:
            category, test = name, None  # a category header closes the test above it
            continue
        if n == len(rows) - 1 and line.startswith("|") and not line.rstrip().endswith("|"):
            _cut_row(line, cut, wrap, test)  # the output ends mid-row: keep what it says, complete stays False
            break
        if not (line.startswith("|") and line.rstrip().endswith("|")) or len(line) <= cut:
            raise ParseError(TOOL, f"unexpected line in the result table: {line[:80]!r}", raw)
        left = line[1:cut].strip()
        body = line[cut + 1 : line.rstrip().rfind("|")]
        chunk = body[1 : 1 + wrap] if body.startswith(" ") else body[:wrap]
        value = body.strip()
        if category.lower() == "metadata":
            meta[left] = value
        elif left and left not in ("Warning", "Info"):
            test = _test_row(category, left, value, raw)
            tests.append(test)
        elif test is None:
            kind = f"a {left} row" if left else "a continuation row"
            where = f" under {category}" if category else ""
            raise ParseError(TOOL, f"{kind}{where} before any test's name (its test's row lost?): {line[:80]!r}", raw)
        elif left:
            test.messages.append((left, [chunk]))
        else:
            _continuation(test, value, chunk, raw)
    done = tuple(_table_test(t) for t in tests)
    if not done and complete:
        raise ParseError(TOOL, "a result table without a test", raw)
    return _report(
        "table",
        done,
        meta.get("DCGM Version"),
        meta.get("Driver Version Detected"),
        complete,
    )


def _section(line: str, cut: int) -> str | None:
    """A category header's name ('|-----  Hardware  ----------+-----...-----|' -> 'Hardware'), else None.
    Read by position and str methods: a regex with a lazy name between runs of spaces and dashes is
    quadratic on a long line of them."""
    if len(line) <= cut or line[0] not in "|+" or line[cut] != "+":
        return None
    left, right = line[1:cut], line[cut + 1 :].rstrip()
    if not right or right[-1] not in "|+" or right[:-1].strip("-") or not right[:-1]:
        return None
    inner = left.strip("-")
    name = inner.strip()
    if not (left.startswith("-") and left.endswith("-")) or not name or inner[:1] != " " or inner[-1:] != " ":
        return None
    return name


def _test_row(category: str, name: str, value: str, raw: str) -> _Test:
    """A test's name row: 'Pass' is the test's own status (4.x, the 3.x deployment rows); 'Pass - GPUs:
    0, 1' is a result (3.x)."""
    status, gpus = _table_status(value, name, raw)
    test = _Test(category, name, status if gpus is None else None, [], [])
    if gpus is not None:
        _add_result(test, EntityResult(gpus, status), raw)
    return test


def _continuation(test: _Test, value: str, chunk: str, raw: str) -> None:
    """A row without a name: a GPU's result ('GPU0: Pass', 3.x 'Fail - GPU: 2') or the next chunk of a
    wrapped message."""
    if gpu := _GPU_ROW.match(value):
        [gpu_id] = _gpu_ids([gpu.group(1)], test.name, raw)
        _add_result(test, EntityResult((gpu_id,), _status(gpu.group(2), test.name, raw)), raw)
    elif (more := _STATUS_ROW.match(value)) and more.group(2) is None and more.group(3):
        status, gpus = _table_status(value, test.name, raw)
        _add_result(test, EntityResult(gpus or (), status), raw)
    elif test.messages:
        test.messages[-1][1].append(chunk)
    else:
        raise ParseError(TOOL, f"{test.name}: a row that is neither a result nor a message: {value[:80]!r}", raw)


def _add_result(test: _Test, result: EntityResult, raw: str) -> None:
    """One result per GPU and test: a second is a row repeated or a lost test row's GPU rows."""
    seen = {g for r in test.results for g in r.gpus}
    if twice := sorted(seen & set(result.gpus)):
        raise ParseError(TOOL, f"{test.name}: GPU {twice[0]} has two results", raw)
    test.results.append(result)


def _cut_row(line: str, cut: int, wrap: int, test: _Test | None) -> None:
    """The last, cut-off row: a wrapped message's next chunk is kept; a test name without its result
    (dcgm-55's '| PCIe') says nothing."""
    body = line[cut + 1 :] if len(line) > cut else ""
    if line[1:cut].strip() or test is None or not test.messages or not body.strip():
        return
    if _GPU_ROW.match(body.strip()) or _STATUS_ROW.match(body.strip()):
        return
    test.messages[-1][1].append(body[1 : 1 + wrap] if body.startswith(" ") else body[:wrap])


def _table_status(value: str, test: str, raw: str) -> tuple[str, tuple[int, ...] | None]:
    """'Pass' -> (Pass, None: the test's own status); 'Pass - All' -> (Pass, ()); 'Fail - GPU: 2' ->
    (Fail, (2,)) (3.x)."""
    match = _STATUS_ROW.match(value)
    if match is None:
        raise ParseError(TOOL, f"{test}: unknown result {value[:40]!r} (not read as a pass)", raw)
    status = _status(match.group(1), test, raw)
    if match.group(3):
        words = match.group(3).replace(",", " ").split()
        return status, _gpu_ids(words, test, raw)
    return status, (() if match.group(2) else None)


def _table_test(t: _Test) -> DiagTest:
    warnings, info = [], []
    for kind, chunks in t.messages:
        text = ("".join(chunks[:-1]) + chunks[-1]).strip()
        if kind == "Warning":
            warnings.append(Message(text))
        else:
            info.append(text)
    plugin = _plugin(t.name, t.category)
    # a deployment check's bare 'Pass' row (3.x) speaks for all GPUs; a plugin's bare status without a GPU
    # row under it (4.x prints one per GPU) names no GPU: its results stay empty, and a judge sees that
    speaks_for_all = plugin == "software" and t.status
    results = tuple(t.results) or ((EntityResult((), t.status),) if speaks_for_all else ())  # type: ignore[arg-type]
    return DiagTest(t.category, t.name, plugin, t.status, results, tuple(warnings), tuple(info))
