"""`nodecheck import-nhc nhc.conf`: an LBNL NHC configuration translated into a playbook.

Each NHC directive (nodecheck.parsers.nhc_conf) becomes a contribution to one nodecheck check's
block; several lines may build one block (eight `check_hw_ib` lines: one `ib.ports` with eight
devices). Every contribution is validated against the check's own parameter model as it is merged,
so the playbook written always loads; a line whose contribution a check refuses, a line for some
hosts only, a check nodecheck does not have and NHC's own settings that nodecheck cannot honour are
listed with their line number and the reason, in the playbook's closing comments and on stderr.

What never translates, by design: NHC's repairs (`-r` restart, `-S` start, `-e`/`-E` actions,
`kill`): nodecheck judges and reports, a drain is the gate's decision (docs/slurm-gate.md).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from nodecheck.config.playbook import MAX_DEADLINE_S, CheckOptions
from nodecheck.core.errors import ConfigError
from nodecheck.parsers.nhc_conf import (
    MAX_CONF_BYTES,
    Directive,
    NhcConf,
    NhcConfError,
    Word,
    parse_nhc_conf,
)

EXIT_TRANSLATED = 0  # every directive translated (or needs nothing in nodecheck)
EXIT_NOTHING = 2  # no directive could be translated: no playbook written
EXIT_PARTIAL = 3  # the playbook was written, some lines were not translated (listed)

_KIB = 1024


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


# ---------------------------------------------------------------- reading the file


def read_conf(path: str) -> tuple[str, str]:
    """(text, sha256) of an operator's nhc.conf: a regular file, at most MAX_CONF_BYTES, UTF-8 text;
    anything else is a ConfigError naming the file (and the line, where there is one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ConfigError(
            f"cannot read: {e.strerror or e}", file=path, hint="check the path and its permissions"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
            raise ConfigError("not a regular file", file=path, hint="give the path of the nhc.conf file itself")
        if info.st_size > MAX_CONF_BYTES:
            raise ConfigError(
                f"{info.st_size} bytes: larger than {MAX_CONF_BYTES // _KIB} KiB, not an NHC configuration",
                file=path,
                hint="NHC configurations are a few KiB; check the path",
            )
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONF_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        raw = b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", file=path) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_CONF_BYTES:  # it grew while being read
        raise ConfigError(f"larger than {MAX_CONF_BYTES // _KIB} KiB: not an NHC configuration", file=path)
    if b"\0" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
        raise ConfigError(
            "a NUL byte: a binary file, not an NHC configuration", file=path, line=line, hint="check the path"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x})",
            file=path,
            line=line,
            hint="a binary file is not an NHC configuration; convert a text file with iconv -t UTF-8",
        ) from None
    return text, hashlib.sha256(raw).hexdigest()


def import_nhc(path: str, registry: Any = None) -> tuple[Translation, str]:
    """The translation of the file at `path` and its playbook text ("" when nothing translated)."""
    text, digest = read_conf(path)
    try:
        conf = parse_nhc_conf(text)
    except NhcConfError as e:
        raise ConfigError(e.reason, file=path, line=e.line, hint="give the path of an NHC configuration") from None
    result = translate(conf, Path(path).name, digest, registry)
    if not result.checks:
        return result, ""
    text = render(result)
    if registry is None:
        verify(text)
    return result, text


def verify(text: str) -> None:
    """Load the playbook text as `nodecheck run` would; every block was validated as it was built,
    so a refusal here is nodecheck's bug, never the operator's input."""
    import tempfile

    from nodecheck.config.playbook import load_playbook

    with tempfile.TemporaryDirectory(prefix="nodecheck-import-nhc.") as folder:
        candidate = Path(folder) / "translated.yml"
        candidate.write_text(text, encoding="utf-8")
        try:
            load_playbook(str(candidate))
        except ConfigError as e:
            raise RuntimeError(f"import-nhc wrote a playbook nodecheck refuses: {e}") from e


def import_nhc_command(args: Any) -> int:
    """`nodecheck import-nhc FILE [-o OUT]`: the playbook to OUT (atomically) or stdout, every line
    not translated on stderr; exit 0 all translated, 3 some not, 2 none (nothing written)."""
    import sys

    from nodecheck.report.store import shared, why, write_atomic

    result, text = import_nhc(args.file)
    for item in result.untranslated:
        print(f"{args.file}:{item.line}: not translated: {item.reason}", file=sys.stderr)
    if not text:
        print(
            f"nodecheck: import-nhc: no line of {args.file} translates into a nodecheck check; nothing written",
            file=sys.stderr,
        )
        return result.exit_code
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        out = Path(args.output)
        if out.is_dir():
            raise ConfigError("is a directory", file=args.output, hint="give the playbook's file name, e.g. site.yml")
        try:
            write_atomic(out, text, shared())
        except OSError as e:
            raise ConfigError(f"cannot write: {why(e)}", file=args.output) from None
    translated = sum(len(v) for v in result.origins.values())
    print(
        f"nodecheck: import-nhc: {translated} line(s) translated into {len(result.checks)} check(s), "
        f"{len(result.untranslated)} not translated"
        + (f"; playbook written to {args.output}" if args.output not in (None, "-") else ""),
        file=sys.stderr,
    )
    return result.exit_code


# ---------------------------------------------------------------- translation


def translate(conf: NhcConf, source: str, sha256: str = "", registry: Any = None) -> Translation:
    """Every directive of `conf` translated, refused or noted; `registry`: the checks to validate
    against (default: every registered check)."""
    if registry is None:
        from nodecheck.checks import all_checks

        registry = all_checks()
    result = Translation(source, sha256, conf.lines)
    for bad in conf.malformed:
        result.untranslated.append(Untranslated(bad.line, bad.text, bad.reason))
    context = _Context()
    for directive in conf.directives:
        try:
            _translate_one(directive, context, result, registry)
        except Refused as e:
            result.untranslated.append(Untranslated(directive.line, directive.text, str(e)))
    for line, (name, pending) in context.settings.items():
        users = sorted(context.used.get(name, set()))
        if users:  # its value went into translated lines: that is its translation
            where = ", ".join(map(str, users))
            result.ignored.append(Remark(line, pending.text, f"{name}: its value is used by line {where}"))
        else:
            result.untranslated.append(pending)
    result.untranslated.sort(key=lambda u: u.line)
    result.ignored.sort(key=lambda r: r.line)
    return result


@dataclass
class _Context:
    """What earlier lines of the file set: variables (for $VAR) and facts later lines use."""

    variables: dict[str, str] = field(default_factory=dict)
    threads: int | None = None  # from check_hw_cpuinfo: a load limit becomes a per-CPU ratio
    threads_line: int = 0
    eth_devices: list[str] = field(default_factory=list)  # check_hw_eth's, in file order
    # settings with no counterpart of their own, by line: untranslated unless a translated line used them
    settings: dict[int, tuple[str, Untranslated]] = field(default_factory=dict)
    used: dict[str, set[int]] = field(default_factory=dict)  # variable -> translated lines that used it
    reading: set[str] = field(default_factory=set)  # the variables the line being translated used


def _translate_one(d: Directive, ctx: _Context, result: Translation, registry: Any) -> None:
    if d.kind == "setting":
        _setting(d, ctx, result)
        return
    if not d.target.every_host:
        raise Refused(
            f"runs only on hosts matching {d.target.raw!r}: a playbook's checks apply to every node it "
            "selects; put this check in a playbook of its own selected by those nodes' labels "
            "(select: {labels: [...]})"
        )
    if d.kind == "shell":
        raise Refused(f"shell code, not one NHC check call ({d.why}): translate it by hand")
    translator = TRANSLATORS.get(d.name)
    if translator is None:
        raise Refused(UNTRANSLATABLE.get(d.name, f"{d.name}: not an NHC check nodecheck knows (a site's own check?)"))
    ctx.reading = set()
    args = [_resolve(word, ctx, d) for word in d.args]
    try:
        pieces = translator(d.name, args, ctx, d)
    except _NoOp as e:
        result.ignored.append(Remark(d.line, d.text, f"{e}: nothing to translate"))
        return
    for piece in pieces:
        _accept(piece, d, result, registry)
    for name in ctx.reading:
        ctx.used.setdefault(name, set()).add(d.line)


def _resolve(word: Word, ctx: _Context, d: Directive) -> str:
    """The word's value: literal text, with $VAR from an earlier `* || VAR=value` line of this file."""
    out: list[str] = []
    for part in word.parts:
        if isinstance(part, str):
            out.append(part)
        elif part.name is not None and part.name in ctx.variables:
            out.append(ctx.variables[part.name])
            ctx.reading.add(part.name)
        else:
            what = "is computed on the node" if part.name is None else "is set outside this file"
            raise Refused(
                f"{part.raw} {what} (/etc/sysconfig/nhc, the environment or NHC itself): "
                "write its value in the line, then import again"
            )
    return "".join(out)


# NHC settings with no effect a nodecheck playbook could carry, and why each needs nothing
IGNORED_SETTINGS = {
    "NHC_RM": "the resource manager NHC drains through; nodecheck's gate is Slurm's (docs/slurm-gate.md)",
    "HOSTNAME": "the host name NHC matches targets against; only `*` lines translate",
    "HOSTNAME_S": "the host name NHC matches targets against; only `*` lines translate",
    "DEBUG": "NHC's debug output",
    "VERBOSE": "NHC's verbose output",
    "SILENT": "NHC's logging",
    "NHC_CHECK_ALL": "nodecheck always runs every check and reports each",
    "NHC_CHECK_FORKED": "nodecheck runs every probe in its own bounded process",
    "NHC_SID": "NHC's own process session",
    "FORCE_SETSID": "NHC's own process session",
}


def _setting(d: Directive, ctx: _Context, result: Translation) -> None:
    value_word = d.args[0] if d.args else Word((), "")
    value = value_word.literal
    if d.target.every_host and value is not None:
        ctx.variables[d.name] = value
    if d.name == "TIMEOUT":
        if not d.target.every_host or value is None or not re.fullmatch(r"[0-9]{1,6}", value):
            raise Refused("TIMEOUT: only a whole number of seconds set for every host translates (deadline_s)")
        if not 0 < int(value) <= MAX_DEADLINE_S:
            raise Refused(f"TIMEOUT={value}: a deadline_s is 1 to {MAX_DEADLINE_S:g} seconds (0: NHC's no watchdog)")
        result.deadline_s = float(int(value))
        result.deadline_line = Remark(d.line, d.text, "NHC's watchdog: the playbook's deadline_s")
        return
    if d.name in IGNORED_SETTINGS:
        result.ignored.append(Remark(d.line, d.text, f"{d.name}: {IGNORED_SETTINGS[d.name]}; nothing to translate"))
        return
    if d.name == "MARK_OFFLINE":
        raise Refused(
            "MARK_OFFLINE: whether failing nodes are drained is not a playbook setting: "
            "run `nodecheck health --observe` (or the gate config's observe: true) to never drain"
        )
    # any other variable changes how NHC's checks run (DF_FLAGS, MAX_SYS_UID, PATH, ...), or holds a
    # value later lines use as $NAME: listed unless a translated line used it (translate() decides)
    reason = f"{d.name}: an NHC setting with no nodecheck counterpart (it changes how NHC's checks run)"
    if d.target.every_host and value is not None:
        ctx.settings[d.line] = (d.name, Untranslated(d.line, d.text, reason + ", and no translated line uses it"))
        return
    raise Refused(reason)


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


def _accept(piece: Piece, d: Directive, result: Translation, registry: Any) -> None:
    """Merge the piece into its check's block if the check exists and accepts the merged block."""
    spec = registry.get(piece.check)
    if spec is None and "." in piece.check:  # command.<label>: a template check, one block per label
        family = registry.get(piece.check.split(".", 1)[0])
        spec = family if getattr(family, "template", False) else None
    if spec is None:
        raise Refused(f"nodecheck has no {piece.check} check in this version")
    origins = result.origins.get(piece.check, [])
    current = result.checks.get(piece.check, {})
    try:
        merged = piece.block if piece.replace else _merge(current, piece.block)
    except _Conflict as e:
        lines = ", ".join(str(r.line) for r in origins)
        raise Refused(f"{piece.check}.{e.key} is {e.old!r} from line {lines} but {e.new!r} here") from None
    try:
        options = CheckOptions.model_validate({**BASELINE.get(piece.check, {}), **merged})
        spec.params.model_validate(options.model_extra or {})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Refused(f"{piece.check} refuses it: {where}: {first['msg']}") from None
    result.checks[piece.check] = merged
    result.origins.setdefault(piece.check, []).append(Remark(d.line, d.text, piece.note))


class _Conflict(Exception):
    def __init__(self, key: str, old: object, new: object) -> None:
        self.key, self.old, self.new = key, old, new
        super().__init__(key)


def _merge(base: Any, add: Any, key: str = "") -> Any:
    """`add` over `base`: mappings key by key, lists of {path: ...} entries by path, other lists as
    a union in order; two different scalars are a conflict."""
    if isinstance(base, dict) and isinstance(add, dict):
        out = dict(base)
        for k, v in add.items():
            out[k] = _merge(out[k], v, f"{key}.{k}" if key else k) if k in out else v
        return out
    if isinstance(base, list) and isinstance(add, list):
        out_list = list(base)
        for item in add:
            keyed = _entry_key(item)
            index = next((i for i, old in enumerate(out_list) if keyed and _entry_key(old) == keyed), None)
            if index is not None and keyed is not None:
                out_list[index] = _merge(out_list[index], item, f"{key}[{keyed[1]}]")
            elif item not in out_list:
                out_list.append(item)
        return out_list
    if base != add:
        raise _Conflict(key, base, add)
    return base


def _entry_key(item: Any) -> tuple[str, Any] | None:
    if isinstance(item, dict):
        for k in ("path", "name"):
            if k in item:
                return k, item[k]
    return None


# ---------------------------------------------------------------- values as NHC reads them


def _getopts(args: list[str], spec: str, check: str) -> tuple[list[tuple[str, str]], list[str]]:
    """bash getopts over `args` with NHC's option string (":0rE:F:..."): (options in order, operands)."""
    takes = {spec[i] for i in range(len(spec) - 1) if spec[i + 1] == ":" and spec[i] != ":"}
    known = set(spec.replace(":", ""))
    options: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        j = 1
        while j < len(arg):
            flag = arg[j]
            if flag not in known:
                raise Refused(f"{check}: -{flag} is not an option of {check} (NHC would fail the check)")
            if flag in takes:
                value = arg[j + 1 :]
                if not value:
                    i += 1
                    if i >= len(args):
                        raise Refused(f"{check}: -{flag} needs a value (NHC would fail the check)")
                    value = args[i]
                options.append((flag, value))
                break
            options.append((flag, ""))
            j += 1
        i += 1
    return options, args[i:]


_SIZE = re.compile(r"([0-9]+)([kKmMgGtTpPeE]?)[bB]?")
_UNITS = {"": 0, "k": 0, "m": 1, "g": 2, "t": 3, "p": 4, "e": 5}  # sizes count kB: k is the unit itself


def kib(value: str, check: str) -> int:
    """An NHC size (nhc_common_parse_size): a number of kB, or with a k/M/G/T/P/E suffix (powers of 1024)."""
    match = _SIZE.fullmatch(value)
    if not match:
        raise Refused(f"{check}: {value!r} is not a size NHC reads (a number of kB, or 32GB, 512m, ...)")
    return int(match.group(1)) * _KIB ** _UNITS[match.group(2).lower()]


def count(value: str, check: str) -> int:
    """An NHC count (nhc_common_parse_count): a number, or with a k/M/G/T suffix (powers of 1000)."""
    match = re.fullmatch(r"([0-9]+)([kKmMgGtTpPeE]?)", value)
    if not match:
        raise Refused(f"{check}: {value!r} is not a count NHC reads (a number, or 10k, 1M)")
    return int(match.group(1)) * 1000 ** (_UNITS[match.group(2).lower()] + (1 if match.group(2) else 0))


def percent(value: str) -> float | None:
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)%", value)
    return float(match.group(1)) if match else None


def _number(value: str, check: str, what: str) -> float:
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", value):
        raise Refused(f"{check}: {what} {value!r} is not a number")
    return float(value)


def _gib(kib_value: int) -> float:
    return round(kib_value / _KIB**2, 3)


_GLOB_CHARS = set("*?[")


def _literal_match(value: str, check: str, what: str) -> str:
    """An NHC match string that is a plain string (no glob, regex or negation): the string."""
    if value.startswith("!") or (len(value) > 1 and value[0] == "/" == value[-1]) or _GLOB_CHARS & set(value):
        raise Refused(
            f"{check}: {what} {value!r} is an NHC match string (glob, /regex/ or !negation); "
            "nodecheck compares exact values: write the exact value"
        )
    return value


# ---------------------------------------------------------------- the translators

Translator = Callable[[str, list[str], _Context, Directive], list[Piece]]


def _fs_mount(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_fs_mount[_rw|_ro]: each mountpoint mounted, with the type, source and options asked."""
    options = {"check_fs_mount_rw": ["rw"], "check_fs_mount_ro": ["ro"]}.get(name, [])
    forbidden: list[str] = []
    notes: list[str] = []
    if args and args[0].startswith("/"):  # the old positional syntax: mountpoint [source] [fstype] [options]
        paths = [args[0]]
        sources = [args[1]] if len(args) > 1 and args[1] else []
        types = [args[2]] if len(args) > 2 and args[2] else []
        option_matches = [args[3]] if name == "check_fs_mount" and len(args) > 3 and args[3] else []
    else:
        opts, rest = _getopts(args, ":0rE:F:O:e:f:o:s:t:", name)
        paths = [v for f, v in opts if f in "fF"] + rest
        sources = [v for f, v in opts if f == "s"]
        types = [v for f, v in opts if f == "t"]
        option_matches = [v for f, v in opts if f == "o"]
        flags = {f for f, _ in opts}
        if "0" in flags:
            raise Refused(f"{name}: -0 makes the check non-fatal; fs.mounts fails a missing mount")
        if flags & set("rOeE"):
            notes.append("NHC's remount and actions (-r -O -e -E) are not translated: nodecheck reports, never repairs")
    if not paths:
        raise Refused(f"{name}: no mountpoint (NHC would fail the check)")
    if len(sources) > 1 or len(types) > 1:
        raise Refused(f"{name}: several -s or -t match strings: fs.mounts takes one source and one type per mount")
    for match in option_matches:
        option, negated = _mount_option(match, name)
        (forbidden if negated else options).append(option)
    entry: dict[str, Any] = {"options": options}
    if forbidden:
        entry["forbidden_options"] = forbidden
    if types:
        entry["fstype"] = _fstype(types[0], name)
    if sources:
        if sources[0].startswith("!"):
            raise Refused(f"{name}: a negated source ({sources[0]}) has no fs.mounts counterpart")
        entry["source"] = sources[0]  # fs.mounts reads NHC's glob and /regex/ alike
    mounts = []
    for path in paths:
        if not path.startswith("/"):
            raise Refused(f"{name}: mountpoint {path!r} is not an absolute path")
        mounts.append({"path": path, **entry})
    return [Piece("fs.mounts", {"mounts": mounts}, "; ".join(notes))]


def _fstype(value: str, check: str) -> str:
    """NHC's -t match string: a plain type or a glob (fs.mounts takes both), never /regex/ or !negated."""
    if value.startswith("!") or (len(value) > 1 and value[0] == "/" == value[-1]) or "[" in value:
        raise Refused(f"{check}: type match {value!r}: fs.mounts takes a type or a glob (fuse.*), not a regex")
    return value


_ONE_OPTION = re.compile(r"/\(\^\|,\)([A-Za-z0-9_.=:@+-]+)\((?:\$\|,|,\|\$)\)/")
_GLOB_OPTION = re.compile(r"\*,?([A-Za-z0-9_.=:@+-]+),?\*")


def _mount_option(value: str, check: str) -> tuple[str, bool]:
    """NHC's -o match string for one mount option, and whether it is negated (must be absent):
    '/(^|,)vers=3(,|$)/', '*hard*', 'rw'; anything wider is refused."""
    negated = value.startswith("!")
    body = value[1:] if negated else value
    for pattern in (_ONE_OPTION, _GLOB_OPTION):
        match = pattern.fullmatch(body)
        if match:
            return match.group(1), negated
    if re.fullmatch(r"[A-Za-z0-9_.=:@+-]+", body):
        return body, negated  # NHC compares the whole option string; one option reads the same
    raise Refused(f"{check}: option match {value!r}: only one option (/(^|,)OPTION(,|$)/, *OPTION*) translates")


# a block device path (a site's `check_fs_free /dev/mapper/vg_root-lv_root 5%`), not a mountpoint
_DEVICE = re.compile(r"/dev/(mapper/|disk/|sd[a-z]|nvme[0-9]|md[0-9]|vd[a-z]|xvd[a-z]|dm-[0-9]|loop[0-9])")


def _fs_space(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_fs_free / _used / _ifree / _iused / _size: fs.free floors for the path."""
    if len(args) < 2 or not args[0].startswith("/"):
        raise Refused(f"{name}: expects an absolute mountpoint and a limit")
    path, limit = args[0], args[1]
    if _DEVICE.match(path):
        raise Refused(
            f"{name}: {path} is a device; NHC compares mountpoints, so this line never matched and checked "
            "nothing: give the mountpoint"
        )
    share = percent(limit)
    note = ""
    if name == "check_fs_free":
        key, value = ("free_pct", share) if share is not None else ("free_gib", _gib(kib(limit, name)))
    elif name in ("check_fs_used", "check_fs_iused"):
        if share is None:
            raise Refused(
                f"{name}: an absolute ceiling ({limit}) has no fs.free counterpart (it judges free space in GiB or %)"
            )
        if share >= 100:
            _nothing(f"{name} {limit}: a limit of 100% never fails")
        key = "free_pct" if name == "check_fs_used" else "inodes_free_pct"
        value = round(100 - share, 3)
        note = f"NHC's used <= {limit} is free >= {value:g}%"
    elif name == "check_fs_ifree":
        if share is None:
            raise Refused(f"{name}: fs.free judges free inodes in %, not a count ({limit})")
        key, value = "inodes_free_pct", share
    else:  # check_fs_size MOUNT [MIN] [MAX]
        if not limit:
            raise Refused(f"{name}: only a minimum size translates (fs.free's size_gib)")
        key, value = "size_gib", _gib(kib(limit, name))
        if len(args) > 2 and args[2]:
            note = f"the maximum ({args[2]}) is not judged"
    return [Piece("fs.free", {"paths": {path: {key: {"fail_below": value}}}}, note)]


def _nothing(why: str) -> NoReturn:
    raise _NoOp(why)


class _NoOp(Exception):
    """A directive that can never fail: nothing to translate (noted, not refused)."""


def _cpuinfo(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_hw_cpuinfo [SOCKETS] [CORES] [THREADS]: NHC's cores and threads are node totals;
    cpu takes sockets, cores per socket, threads per core and the online CPU count."""
    counts = [int(_number(v, name, "count")) if v else None for v in (args + ["", "", ""])[:3]]
    sockets, cores, threads = counts
    if not any(counts):
        raise Refused(f"{name}: no counts given (NHC would check nothing)")
    block: dict[str, Any] = {}
    if sockets:
        block["sockets"] = sockets
    if cores:
        if not sockets or cores % sockets:
            raise Refused(f"{name}: {cores} cores on {sockets} sockets is not a whole number per socket")
        block["cores_per_socket"] = cores // sockets
    if threads:
        block["cpus"] = threads
        ctx.threads, ctx.threads_line = threads, d.line
        if cores:
            if threads % cores:
                raise Refused(f"{name}: {threads} threads on {cores} cores is not a whole number per core")
            block["threads_per_core"] = threads // cores
    return [Piece("cpu", block, "NHC's totals as cpu counts them: per socket, per core, online CPUs")]


def _physmem(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_hw_physmem MIN MAX [FUDGE]: MemTotal (kB) within [MIN - FUDGE, MAX + FUDGE]."""
    if len(args) < 2:
        raise Refused(f"{name}: expects a minimum and a maximum")
    low, high = kib(args[0], name), kib(args[1], name)
    fudge = args[2] if len(args) > 2 and args[2] else "0"
    share = percent(fudge)
    if share is None:  # an absolute fudge, as a share of the expected size
        share = round(kib(fudge, name) * 100 / max(high, 1), 3)
    note = "NHC's sizes are kB (1024 bytes), here GiB"
    if low == high:
        if share > 50:
            raise Refused(f"{name}: a fudge of {share:g}% is beyond mem's total_tolerance_pct (at most 50)")
        return [Piece("mem", {"total_gib": _gib(low), "total_tolerance_pct": share}, note)]
    floor = _gib(round(low * (1 - share / 100)))
    if floor <= 0:
        _nothing(f"{name} {args[0]} {args[1]}: a minimum of nothing never fails")
    note += f"; the maximum ({args[1]}) is not judged"
    return [Piece("mem", {"total_floor_gib": {"fail_below": floor}}, note)]


def _swap(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_hw_swap MIN MAX [FUDGE]: mem judges swap on or off, not its size."""
    if len(args) < 2:
        raise Refused(f"{name}: expects a minimum and a maximum")
    low, high = kib(args[0], name), kib(args[1], name)
    if high == 0:
        return [Piece("mem", {"swap": "off"}, "no swap: SwapTotal must be 0")]
    if low > 0:
        return [Piece("mem", {"swap": "on"}, f"swap must be configured; its size ({args[0]}-{args[1]}) is not judged")]
    raise Refused(f"{name}: a swap size ceiling ({args[1]}) has no mem counterpart (swap: on|off)")


def _mem_free(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    if not args:
        raise Refused(f"{name}: expects a minimum")
    if name == "check_hw_swap_free":
        raise Refused(f"{name}: mem judges whether swap is configured, not free swap")
    floor = _gib(kib(args[0], name))
    note = "NHC counts buffers and cache as free: MemAvailable"
    return [Piece("mem", {"available_gib": {"fail_below": floor}}, note)]


def _mcelog(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_hw_mcelog: corrected errors above MCELOG_MAX_CORRECTED_RATE (9) a day or any
    uncorrected one fail; mem judges the same from the kernel's EDAC counters."""
    ctx.reading |= {"MCELOG_MAX_CORRECTED_RATE", "MCELOG_MAX_UNCORRECTED_RATE"} & set(ctx.variables)
    corrected = ctx.variables.get("MCELOG_MAX_CORRECTED_RATE", "9")
    if not re.fullmatch(r"[0-9]+", corrected) or ctx.variables.get("MCELOG_MAX_UNCORRECTED_RATE", "0") != "0":
        raise Refused(f"{name}: only whole MCELOG_MAX_CORRECTED_RATE and MCELOG_MAX_UNCORRECTED_RATE=0 translate")
    note = "mem reads the kernel's EDAC counters, not mcelog; like NHC, a node without them passes"
    return [Piece("mem", {"ecc": "if_present", "ce_per_day": {"fail_above": float(corrected)}}, note)]


def _hw_ib(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    if not args or not args[0]:
        raise Refused(f"{name}: no rate: NHC passes with any Active port; nodecheck's ib.ports needs nothing more")
    rate = _number(args[0], name, "rate")
    # NHC reads every port's state and rate from sysfs, whatever its link layer (a RoCE bond too)
    block: dict[str, Any] = {"min_rate_gbps": rate, "link_layer": "any"}
    note = f"NHC passes when one port runs at exactly {args[0]} Gb/s; ib.ports judges every port (rate >= {args[0]})"
    if len(args) > 1 and args[1]:
        device = args[1].split(":", 1)[0]
        block["devices"] = [device]
        note = f"NHC's {args[1]}: ib.ports judges every port of CA {device}"
    return [Piece("ib.ports", block, note)]


def _ps_service(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_ps_service [-0] [-f] [-S|-r|-c|-s|-k] [-u user] [-d daemon | -m mstr] [-e|-E action] SERVICE:
    running (required), or with -s/-k not running (forbidden)."""
    opts, rest = _getopts(args, ":0E:SVcd:e:fkm:rsu:v", name)
    flags = {f for f, _ in opts}
    values = dict(opts)
    service = " ".join(rest)
    if not service:
        raise Refused(f"{name}: no service name (NHC would fail the check)")
    if "0" in flags:
        raise Refused(f"{name}: -0 makes the check non-fatal; nodecheck's services fails a stopped service")
    if "m" in values or "f" in flags:
        raise Refused(f"{name}: -m/-f match the process list by pattern; services expects a unit name")
    notes = []
    if flags & set("SrceEk"):
        notes.append("NHC's start/restart/stop/kill/actions are not translated: nodecheck reports, never repairs")
    if "u" in values:
        notes.append(f"the owner ({values['u']}) is not judged")
    if "d" in values:
        notes.append(f"NHC looks for the process {values['d']}; services judges the unit {service}")
    key = "forbidden" if flags & {"s", "k"} else "required"
    return [Piece("services", {key: [service]}, "; ".join(notes))]


def _ps_daemon(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_ps_daemon COMMAND [OWNER] [ARGS] (deprecated for check_ps_service): COMMAND running."""
    if not args or len(args) > 2:
        raise Refused(f"{name}: only `{name} COMMAND [OWNER]` translates")
    note = "NHC matches the process; services judges the unit of that name (the process list without systemd)"
    if len(args) == 2:
        note += f"; the owner ({args[1]}) is not judged"
    return [Piece("services", {"required": [args[0]]}, note)]


def _actions(args: list[str], name: str) -> str:
    """NHC's actions for the rogue-process checks: fail (die, the default) or only warn."""
    opts, rest = _getopts(args, ":c:u:n:p:", name)
    if opts:
        raise Refused(f"{name}: ignore lists (-c -u -n -p) do not translate; list them in proc.health's allow-list")
    actions = set(rest) or {"die"}
    unknown = actions - {"die", "kill", "ignore", "log", "syslog"}
    if unknown:
        raise Refused(f"{name}: unknown action(s) {', '.join(sorted(unknown))}")
    if actions <= {"ignore"}:
        raise _NoOp(f"{name} ignore: NHC does nothing")
    return "fail" if "die" in actions else "warn"


def _unauth_users(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_ps_unauth_users / check_ps_userproc_lineage: users' processes outside their jobs."""
    status = _actions(args, name)
    note = "NHC exempts uids up to MAX_SYS_UID (99), proc.health judges uids from uid_min (1000) outside Slurm jobs"
    if status == "warn":
        note += "; NHC only logs (no `die`): a WARN"
    return [Piece("proc.health", {"leftovers": status}, note)]


def _loadavg(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_ps_loadavg L1 [L5] [L15]: proc.health fails the 5-minute load per CPU above a ratio."""
    limits = args[:3] + [""] * (3 - len(args[:3]))
    if not any(limits):
        _nothing(f"{name} without limits never fails")
    which, limit = ("5-minute", limits[1]) if limits[1] else ("1-minute", limits[0])
    if not limit:
        raise Refused(f"{name}: only a 1- or 5-minute limit translates (proc.health judges the 5-minute load)")
    if ctx.threads is None:
        raise Refused(
            f"{name}: proc.health judges load per CPU, and no check_hw_cpuinfo line before this one gives "
            "the CPU count: put check_hw_cpuinfo first"
        )
    ratio = round(_number(limit, name, "load limit") / ctx.threads, 3)
    note = f"NHC's {which} load < {limit} with {ctx.threads} CPUs (line {ctx.threads_line}): {ratio:g} per CPU"
    if which == "1-minute":
        note += "; proc.health judges the 5-minute load (a shorter spike passes)"
    return [Piece("proc.health", {"load_fail_per_cpu": ratio}, note)]


def _gpu_health(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    if args:
        raise Refused(f"{name}: its arguments do not translate; gpu.health's defaults judge every GPU")
    what = {
        "check_nvlink_status": "every NVLink active: gpu.health fails an inactive link",
        "check_gpu_clock_throttling": "gpu.health fails HW slowdown, thermal and power-brake clock events",
    }.get(name, f"NHC's {name} runs a GPU health tool; gpu.health judges NVML's facts")
    return [Piece("gpu.health", {}, what)]


def _gpu_count(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    if len(args) != 1:
        raise Refused(f"{name}: expects the GPU count")
    return [Piece("gpu.count", {"expect": int(_number(args[0], name, "GPU count"))})]


def _gpu_xid(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    if args:
        raise Refused(f"{name}: its arguments do not translate")
    return [Piece("gpu.xid", {}, "aznhc's Xid list differs from gpu.xid's table (nodecheck/parsers/xid_codes.py)")]


def _label(d: Directive, what: str) -> str:
    """command.<label>: 1-64 of a-z 0-9 _ - (config.playbook TEMPLATE_LABEL), naming the NHC line."""
    base = re.sub(r"[^a-z0-9_-]+", "_", what.lower()).strip("_")[:40] or "cmd"
    return f"command.nhc_{d.line}_{base}"


def _command(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_cmd_output / check_cmd_status: NHC runs the command itself (nhc_cmd_with_timeout), no
    shell: an argv. Exit code -r (default 0), -m match strings on the output lines, -t timeout (5 s)."""
    spec = ":C:M:O:e:m:r:t:" if name == "check_cmd_output" else ":C:r:t:"
    opts, rest = _getopts(args, spec, name)
    values = dict(opts)
    if "C" in values or "O" in values:
        raise Refused(f"{name}: -C/-O are for NHC's own wrapper checks")
    notes = []
    if "e" in values:
        words = values["e"].split()  # NHC: CMD_LIST=( $CMD ): split on blanks, no quotes
        if _GLOB_CHARS & set(values["e"]):
            raise Refused(f"{name}: -e {values['e']!r}: NHC expands its glob characters on the node")
        if rest:
            raise Refused(f"{name}: both -e and a command")
    else:
        words = rest
    if not words:
        raise Refused(f"{name}: no command (NHC would fail the check)")
    shell_words = [w for w in words if w in ("|", "||", "&&", ";", "&", ">", "<", ">>", "2>&1")]
    if shell_words:
        raise Refused(
            f"{name}: {shell_words[0]!r} in the command: NHC runs no shell and passes it as an argument; "
            "write the command you mean as a command check by hand (sh: with shell: true for a pipeline)"
        )
    block: dict[str, Any] = {"argv": words, "description": f"NHC {name} ({_comment(d.text, 120)})"[:200]}
    timeout = values.get("t", "5")  # NHC's default
    block["timeout_s"] = _number(timeout, name, "timeout")
    if "r" in values:
        block["exit"] = [int(_number(values["r"], name, "exit code"))]
    matches = [v for f, v in opts if f == "m"]
    positive = [_line_regex(m, name) for m in matches if not m.startswith("!")]
    negative = [_line_regex(m[1:], name) for m in matches if m.startswith("!")]
    if len(positive) == 1:
        block["match"] = positive[0]
    elif positive:  # every one must match some line: one lookahead each, from the start
        block["match"] = r"\A" + "".join(rf"(?=[\s\S]*?(?:{p}))" for p in positive)
    if negative:
        block["no_match"] = "|".join(f"(?:{n})" for n in negative)
    if "M" in values:
        notes.append("NHC's -M message is not translated")
    return [Piece(_label(d, words[0].rsplit("/", 1)[-1]), block, "; ".join(notes))]


_POSIX_CLASSES = {
    "[:space:]": r"\s",
    "[:blank:]": r" \t",
    "[:digit:]": "0-9",
    "[:alpha:]": "A-Za-z",
    "[:alnum:]": "A-Za-z0-9",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:xdigit:]": "0-9A-Fa-f",
    "[:punct:]": r"!-/:-@\[-`{-~",
}


def _line_regex(mstr: str, check: str) -> str:
    """An NHC match string on one output line as a Python regular expression (re.MULTILINE): a
    /regex/ (bash ERE, searched in the line) or a glob (the whole line)."""
    if len(mstr) > 1 and mstr[0] == "/" == mstr[-1]:
        pattern = mstr[1:-1]
        for posix, python in _POSIX_CLASSES.items():
            pattern = pattern.replace(posix, python)
        if "[:" in pattern:
            raise Refused(f"{check}: {mstr!r} uses a POSIX class Python's re lacks")
        # ERE's ^ and $ anchor the line NHC matched: in the whole output they anchor each line
        return pattern
    out = ["^"]
    i = 0
    while i < len(mstr):
        ch = mstr[i]
        if ch == "*":
            out.append(r"[^\n]*")
        elif ch == "?":
            out.append(r"[^\n]")
        elif ch == "[" and "]" in mstr[i + 2 :]:
            close = mstr.index("]", i + 2)
            body = mstr[i + 1 : close]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    return "".join(out)


def _hw_eth(name: str, args: list[str], ctx: _Context, d: Directive) -> list[Piece]:
    """check_hw_eth DEV: NHC looks the device up in /proc/net/dev; so does this one command check,
    for every device of the file (one probe, no tool beyond cat): each name at a line's start."""
    if len(args) != 1 or not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", args[0]):
        raise Refused(f"{name}: expects one network device name")
    if args[0] not in ctx.eth_devices:
        ctx.eth_devices.append(args[0])
    devices = ctx.eth_devices
    match = r"\A" + "".join(rf"(?=[\s\S]*?^\s*{re.escape(dev)}:)" for dev in devices)
    block = {
        "argv": ["cat", "/proc/net/dev"],
        "match": match,
        "description": "NHC check_hw_eth: network devices " + ", ".join(devices) + " in /proc/net/dev",
    }
    return [Piece("command.nhc_eth", block, replace=True)]


TRANSLATORS: dict[str, Translator] = {
    "check_fs_mount": _fs_mount,
    "check_fs_mount_rw": _fs_mount,
    "check_fs_mount_ro": _fs_mount,
    "check_fs_free": _fs_space,
    "check_fs_used": _fs_space,
    "check_fs_ifree": _fs_space,
    "check_fs_iused": _fs_space,
    "check_fs_size": _fs_space,
    "check_hw_cpuinfo": _cpuinfo,
    "check_hw_physmem": _physmem,
    "check_hw_swap": _swap,
    "check_hw_mcelog": _mcelog,
    "check_hw_physmem_free": _mem_free,
    "check_hw_swap_free": _mem_free,
    "check_hw_ib": _hw_ib,
    "check_ps_service": _ps_service,
    "check_ps_daemon": _ps_daemon,
    "check_ps_unauth_users": _unauth_users,
    "check_ps_userproc_lineage": _unauth_users,
    "check_ps_loadavg": _loadavg,
    "check_nv_healthmon": _gpu_health,
    "check_nvsmi_healthmon": _gpu_health,  # csc_nvidia_smi.nhc, shipped with NHC; aznhc's too
    "check_gpu_count": _gpu_count,  # aznhc
    "check_gpu_xid": _gpu_xid,  # aznhc
    "check_nvlink_status": _gpu_health,  # aznhc
    "check_gpu_clock_throttling": _gpu_health,  # aznhc
    "check_cmd_output": _command,
    "check_cmd_status": _command,
    "check_hw_eth": _hw_eth,
}

# NHC checks that have no nodecheck counterpart, and why (what to use instead)
UNTRANSLATABLE = {
    "check_fs_inodes": "check_fs_inodes judges the total inode count; fs.free judges free inodes (check_fs_ifree)",
    "check_hw_mem": "check_hw_mem judges RAM + swap together; mem judges them apart (check_hw_physmem, check_hw_swap)",
    "check_hw_mem_free": "check_hw_mem_free counts free RAM + swap together; mem judges available RAM "
    "(check_hw_physmem_free) and free swap apart",
    "check_hw_gm": "Myrinet: no nodecheck check",
    "check_file_test": "file attribute tests: no nodecheck check (a `command` check running `test` can)",
    "check_file_stat": "file metadata: no nodecheck check (a `command` check running `stat` can)",
    "check_file_contents": "file contents: no nodecheck check (a `command` check running `grep` can)",
    "check_dmi_data_match": "DMI/BIOS data: no nodecheck check",
    "check_dmi_raw_data_match": "DMI/BIOS data: no nodecheck check",
    "check_ps_blacklist": "a forbidden process by name and owner: no nodecheck check judges owners",
    "check_ps_cpu": "per-process CPU use: no nodecheck check",
    "check_ps_mem": "per-process memory use: no nodecheck check",
    "check_ps_physmem": "per-process memory use: no nodecheck check",
    "check_ps_time": "per-process CPU time: no nodecheck check",
    "check_ps_kswapd": "kswapd CPU time: no nodecheck check",
    "check_moab_sched": "Moab: no nodecheck check",
    "check_moab_rm": "Moab: no nodecheck check",
    "check_moab_torque": "TORQUE: no nodecheck check",
    "check_net_ping": "ping: no nodecheck check (nccl.env tests the job's own connections)",
    "check_net_socket": "sockets: no nodecheck check",
    "check_cmd_dmesg": "dmesg matching: no nodecheck check (gpu.xid and node.oom read the kernel log)",
    # aznhc (Azure/azurehpc-health-checks) checks
    "check_gpu_bw": "aznhc's host-GPU copy bandwidth: no nodecheck check",
    "check_gpu_ecc": "aznhc's ECC thresholds differ from gpu.health's (volatile uncorrectable, row remaps)",
    "check_nccl_allreduce": "aznhc's NCCL all-reduce: nccl.allreduce_single (busbw_gbps, max_bytes) by hand",
    "check_nccl_allreduce_ib_loopback": "aznhc's NCCL loopback test: no nodecheck check",
    "check_ib_bw_gdr": "aznhc's GPUDirect loopback bandwidth: ib.pairs tests bandwidth between nodes",
    "check_ib_bw_non_gdr": "aznhc's loopback bandwidth: ib.pairs tests bandwidth between nodes",
    "check_ib_link_flapping": "aznhc's link-flap count: ib.counters judges LinkDownedCounter",
    "check_hw_topology": "aznhc's topology file: no nodecheck check",
    "check_nvme_count": "aznhc's NVMe count: no nodecheck check",
    "check_cpu_stream": "aznhc's STREAM memory bandwidth: no nodecheck check",
}


# ---------------------------------------------------------------- the playbook text


def render(result: Translation) -> str:
    """The playbook: YAML a `nodecheck run --playbook` loads, each check under comments naming the
    NHC lines it came from, the lines not translated listed at the end."""
    src = result.source
    out = [
        "# nodecheck playbook translated from an LBNL NHC configuration by `nodecheck import-nhc`.",
        f"# source: {_comment(src)} ({result.lines} lines, sha256 {result.sha256 or 'unknown'})",
        f"# {sum(len(v) for v in result.origins.values())} line(s) translated into {len(result.checks)} check(s); "
        f"{len(result.untranslated)} not translated (listed at the end); {len(result.ignored)} need nothing.",
        "# NHC's repairs (start/restart a service, remount, -e/-E actions, kill) are never translated:",
        "# nodecheck judges and reports; draining is the Slurm gate's decision (docs/slurm-gate.md).",
        "version: 1",
        "description: " + _scalar(f"Translated from NHC configuration {src} by nodecheck import-nhc"),
    ]
    if result.deadline_s is not None and result.deadline_line is not None:
        out.append(f"# {_where(src, result.deadline_line)}  {_comment(result.deadline_line.text)}")
        out.append(f"deadline_s: {int(result.deadline_s)}")
    out.append("checks:")
    for name in result.checks:
        block = block_of(result, name)
        for origin in result.origins[name]:
            out.append(f"  # {_where(src, origin)}  {_comment(origin.text)}")
            if origin.note:
                out.append(f"  #   {_comment(origin.note)}")
        if block:
            body = yaml.safe_dump({name: block}, sort_keys=False, default_flow_style=False, width=100)
            out.extend("  " + line for line in body.rstrip("\n").split("\n"))
        else:
            out.append(f"  {name}: {{}}")
    if result.ignored:
        out.append("")
        out.append("# Lines that need nothing in nodecheck:")
        for item in result.ignored:
            out.append(f"# {_where(src, item)}  {_comment(item.text)}")
            out.append(f"#   {_comment(item.note)}")
    if result.untranslated:
        out.append("")
        out.append("# NOT TRANSLATED (line: why):")
        for miss in result.untranslated:
            out.append(f"# {_comment(src)}:{miss.line}  {_comment(miss.text)}")
            out.append(f"#   {_comment(miss.reason)}")
    return "\n".join(out) + "\n"


def _where(src: str, remark: Remark) -> str:
    return f"{_comment(src)}:{remark.line}"


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def _comment(text: str, limit: int = 200) -> str:
    """Text fit for one YAML comment line: no control characters, bounded."""
    text = _UNPRINTABLE.sub("?", text)
    return text if len(text) <= limit else text[:limit] + "..."


def _scalar(text: str) -> str:
    return yaml.safe_dump(text, default_style='"', width=10_000).strip().removesuffix("...").strip()
