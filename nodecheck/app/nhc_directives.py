"""The translators: one function per NHC check family, each turning one directive's arguments into
pieces of nodecheck checks' blocks; TRANSLATORS dispatches on the check's name and UNTRANSLATABLE
says why the NHC checks with no counterpart do not translate."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NoReturn

from nodecheck.app.nhc_model import Context, NoOp, Piece, Refused
from nodecheck.app.nhc_render import comment
from nodecheck.app.nhc_values import GLOB_CHARS, getopts, gib, kib, number, percent
from nodecheck.parsers.nhc_conf import Directive

Translator = Callable[[str, list[str], Context, Directive], list[Piece]]


def _fs_mount(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
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
        opts, rest = getopts(args, ":0rE:F:O:e:f:o:s:t:", name)
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


def _fs_space(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
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
        key, value = ("free_pct", share) if share is not None else ("free_gib", gib(kib(limit, name)))
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
        key, value = "size_gib", gib(kib(limit, name))
        if len(args) > 2 and args[2]:
            note = f"the maximum ({args[2]}) is not judged"
    return [Piece("fs.free", {"paths": {path: {key: {"fail_below": value}}}}, note)]


def _nothing(why: str) -> NoReturn:
    raise NoOp(why)


def _cpuinfo(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_hw_cpuinfo [SOCKETS] [CORES] [THREADS]: NHC's cores and threads are node totals;
    cpu takes sockets, cores per socket, threads per core and the online CPU count."""
    counts = [int(number(v, name, "count")) if v else None for v in (args + ["", "", ""])[:3]]
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


def _physmem(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
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
        return [Piece("mem", {"total_gib": gib(low), "total_tolerance_pct": share}, note)]
    floor = gib(round(low * (1 - share / 100)))
    if floor <= 0:
        _nothing(f"{name} {args[0]} {args[1]}: a minimum of nothing never fails")
    note += f"; the maximum ({args[1]}) is not judged"
    return [Piece("mem", {"total_floor_gib": {"fail_below": floor}}, note)]


def _swap(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_hw_swap MIN MAX [FUDGE]: mem judges swap on or off, not its size."""
    if len(args) < 2:
        raise Refused(f"{name}: expects a minimum and a maximum")
    low, high = kib(args[0], name), kib(args[1], name)
    if high == 0:
        return [Piece("mem", {"swap": "off"}, "no swap: SwapTotal must be 0")]
    if low > 0:
        return [Piece("mem", {"swap": "on"}, f"swap must be configured; its size ({args[0]}-{args[1]}) is not judged")]
    raise Refused(f"{name}: a swap size ceiling ({args[1]}) has no mem counterpart (swap: on|off)")


def _mem_free(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    if not args:
        raise Refused(f"{name}: expects a minimum")
    if name == "check_hw_swap_free":
        raise Refused(f"{name}: mem judges whether swap is configured, not free swap")
    floor = gib(kib(args[0], name))
    note = "NHC counts buffers and cache as free: MemAvailable"
    return [Piece("mem", {"available_gib": {"fail_below": floor}}, note)]


def _mcelog(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_hw_mcelog: corrected errors above MCELOG_MAX_CORRECTED_RATE (9) a day or any
    uncorrected one fail; mem judges the same from the kernel's EDAC counters."""
    ctx.reading |= {"MCELOG_MAX_CORRECTED_RATE", "MCELOG_MAX_UNCORRECTED_RATE"} & set(ctx.variables)
    corrected = ctx.variables.get("MCELOG_MAX_CORRECTED_RATE", "9")
    if not re.fullmatch(r"[0-9]+", corrected) or ctx.variables.get("MCELOG_MAX_UNCORRECTED_RATE", "0") != "0":
        raise Refused(f"{name}: only whole MCELOG_MAX_CORRECTED_RATE and MCELOG_MAX_UNCORRECTED_RATE=0 translate")
    note = "mem reads the kernel's EDAC counters, not mcelog; like NHC, a node without them passes"
    return [Piece("mem", {"ecc": "if_present", "ce_per_day": {"fail_above": float(corrected)}}, note)]


def _hw_ib(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    if not args or not args[0]:
        raise Refused(f"{name}: no rate: NHC passes with any Active port; nodecheck's ib.ports needs nothing more")
    rate = number(args[0], name, "rate")
    # NHC reads every port's state and rate from sysfs, whatever its link layer (a RoCE bond too)
    block: dict[str, Any] = {"min_rate_gbps": rate, "link_layer": "any"}
    note = f"NHC passes when one port runs at exactly {args[0]} Gb/s; ib.ports judges every port (rate >= {args[0]})"
    if len(args) > 1 and args[1]:
        device = args[1].split(":", 1)[0]
        block["devices"] = [device]
        note = f"NHC's {args[1]}: ib.ports judges every port of CA {device}"
    return [Piece("ib.ports", block, note)]


def _ps_service(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_ps_service [-0] [-f] [-S|-r|-c|-s|-k] [-u user] [-d daemon | -m mstr] [-e|-E action] SERVICE:
    running (required), or with -s/-k not running (forbidden)."""
    opts, rest = getopts(args, ":0E:SVcd:e:fkm:rsu:v", name)
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


def _ps_daemon(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_ps_daemon COMMAND [OWNER] [ARGS] (deprecated for check_ps_service): COMMAND running."""
    if not args or len(args) > 2:
        raise Refused(f"{name}: only `{name} COMMAND [OWNER]` translates")
    note = "NHC matches the process; services judges the unit of that name (the process list without systemd)"
    if len(args) == 2:
        note += f"; the owner ({args[1]}) is not judged"
    return [Piece("services", {"required": [args[0]]}, note)]


def _actions(args: list[str], name: str) -> str:
    """NHC's actions for the rogue-process checks: fail (die, the default) or only warn."""
    opts, rest = getopts(args, ":c:u:n:p:", name)
    if opts:
        raise Refused(f"{name}: ignore lists (-c -u -n -p) do not translate; list them in proc.health's allow-list")
    actions = set(rest) or {"die"}
    unknown = actions - {"die", "kill", "ignore", "log", "syslog"}
    if unknown:
        raise Refused(f"{name}: unknown action(s) {', '.join(sorted(unknown))}")
    if actions <= {"ignore"}:
        raise NoOp(f"{name} ignore: NHC does nothing")
    return "fail" if "die" in actions else "warn"


def _unauth_users(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_ps_unauth_users / check_ps_userproc_lineage: users' processes outside their jobs."""
    status = _actions(args, name)
    note = "NHC exempts uids up to MAX_SYS_UID (99), proc.health judges uids from uid_min (1000) outside Slurm jobs"
    if status == "warn":
        note += "; NHC only logs (no `die`): a WARN"
    return [Piece("proc.health", {"leftovers": status}, note)]


def _loadavg(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
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
    ratio = round(number(limit, name, "load limit") / ctx.threads, 3)
    note = f"NHC's {which} load < {limit} with {ctx.threads} CPUs (line {ctx.threads_line}): {ratio:g} per CPU"
    if which == "1-minute":
        note += "; proc.health judges the 5-minute load (a shorter spike passes)"
    return [Piece("proc.health", {"load_fail_per_cpu": ratio}, note)]


def _gpu_health(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    if args:
        raise Refused(f"{name}: its arguments do not translate; gpu.health's defaults judge every GPU")
    what = {
        "check_nvlink_status": "every NVLink active: gpu.health fails an inactive link",
        "check_gpu_clock_throttling": "gpu.health fails HW slowdown, thermal and power-brake clock events",
    }.get(name, f"NHC's {name} runs a GPU health tool; gpu.health judges NVML's facts")
    return [Piece("gpu.health", {}, what)]


def _gpu_count(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    if len(args) != 1:
        raise Refused(f"{name}: expects the GPU count")
    return [Piece("gpu.count", {"expect": int(number(args[0], name, "GPU count"))})]


def _gpu_xid(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    if args:
        raise Refused(f"{name}: its arguments do not translate")
    return [Piece("gpu.xid", {}, "aznhc's Xid list differs from gpu.xid's table (nodecheck/parsers/xid_codes.py)")]


def _label(d: Directive, what: str) -> str:
    """command.<label>: 1-64 of a-z 0-9 _ - (config.playbook TEMPLATE_LABEL), naming the NHC line."""
    base = re.sub(r"[^a-z0-9_-]+", "_", what.lower()).strip("_")[:40] or "cmd"
    return f"command.nhc_{d.line}_{base}"


def _command(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
    """check_cmd_output / check_cmd_status: NHC runs the command itself (nhc_cmd_with_timeout), no
    shell: an argv. Exit code -r (default 0), -m match strings on the output lines, -t timeout (5 s)."""
    spec = ":C:M:O:e:m:r:t:" if name == "check_cmd_output" else ":C:r:t:"
    opts, rest = getopts(args, spec, name)
    values = dict(opts)
    if "C" in values or "O" in values:
        raise Refused(f"{name}: -C/-O are for NHC's own wrapper checks")
    notes = []
    if "e" in values:
        words = values["e"].split()  # NHC: CMD_LIST=( $CMD ): split on blanks, no quotes
        if GLOB_CHARS & set(values["e"]):
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
    block: dict[str, Any] = {"argv": words, "description": f"NHC {name} ({comment(d.text, 120)})"[:200]}
    timeout = values.get("t", "5")  # NHC's default
    block["timeout_s"] = number(timeout, name, "timeout")
    if "r" in values:
        block["exit"] = [int(number(values["r"], name, "exit code"))]
    matches = [v for f, v in opts if f == "m"]
    positive = [_line_regex(m, name, f"p{i}") for i, m in enumerate(matches) if not m.startswith("!")]
    negative = [_line_regex(m[1:], name, f"n{i}") for i, m in enumerate(matches) if m.startswith("!")]
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


def _line_regex(mstr: str, check: str, tag: str = "") -> str:
    """An NHC match string on one output line as a Python regular expression (re.MULTILINE): a
    /regex/ (bash ERE, searched in the line) or a glob (the whole line, as bash's [[ == ]]). `tag`
    keeps the group names of several globs in one check's combined regex apart."""
    if len(mstr) > 1 and mstr[0] == "/" == mstr[-1]:
        pattern = mstr[1:-1]
        for posix, python in _POSIX_CLASSES.items():
            pattern = pattern.replace(posix, python)
        if "[:" in pattern:
            raise Refused(f"{check}: {mstr!r} uses a POSIX class Python's re lacks")
        # ERE's ^ and $ anchor the line NHC matched: in the whole output they anchor each line
        return pattern
    return _glob_regex(mstr, tag)


def _glob_regex(glob: str, tag: str) -> str:
    """A glob over one whole line, in time linear in the line. Split at its stars, a glob is
    fixed-length segments (characters, ?, [classes]): s0*s1*...*sk. Written as ^s0[^\n]*s1...[^\n]*sk$,
    each star backtracks into the others (*gpu*ok*ready* on a 13 KB line: 29.5 s). But the earliest
    place a middle segment fits is always as good as any later one (it leaves the most line for the
    rest), so each middle segment is found once, at its earliest place, and never retried: inside a
    lookahead, which Python's re does not backtrack into, captured and consumed by a back-reference
    (the atomic-group idiom that also works before Python 3.11). Only the last segment, which must end
    the line, is searched from the end."""
    segments = [_glob_segment(s) for s in _split_stars(glob)]
    if len(segments) == 1:
        return "^" + segments[0] + "$"
    out = ["^", segments[0]]
    for i, segment in enumerate(segments[1:-1]):
        if segment:
            name = f"nhc{tag}s{i}"
            out.append(rf"(?=(?P<{name}>[^\n]*?{segment}))(?P={name})")
    out.append(r"[^\n]*" + segments[-1] + "$")
    return "".join(out)


NEWLINE = "\n"  # inside a class: a negated class never takes the line's end


def _split_stars(glob: str) -> list[str]:
    """The glob cut at each star outside a [class] ("[*]" is a literal star)."""
    pieces, start, i = [], 0, 0
    while i < len(glob):
        if glob[i] == "[" and "]" in glob[i + 2 :]:
            i = glob.index("]", i + 2)
        elif glob[i] == "*":
            pieces.append(glob[start:i])
            start = i + 1
        i += 1
    return [*pieces, glob[start:]]


def _glob_segment(text: str) -> str:
    """A star-free piece of a glob: ? is one character of the line, [...] / [!...] a class."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "?":
            out.append(r"[^\n]")
        elif ch == "[" and "]" in text[i + 2 :]:
            close = text.index("]", i + 2)
            body = text[i + 1 : close]
            negated = body.startswith("!")
            # a class never matches the line's end: NHC matched one line
            body = body[1:] if negated else body
            out.append("[" + ("^" + NEWLINE if negated else "") + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _hw_eth(name: str, args: list[str], ctx: Context, d: Directive) -> list[Piece]:
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
