"""What nccl-tests prints (src/util.cu): the parameter and header lines, a rank's device line, and
the -J JSON report."""

from __future__ import annotations

import os
import re
import time

from nccl_tests.options import Options
from nccl_tests.state import write_out

# PCI bus numbers of the 8 GPUs of an H100 HGX board, as the fake NVML states give them
BUS_IDS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")


def float_str(value: float, width: int) -> str:
    """getFloatStr: 2 decimals while they fit, then 1, then 0, then an exponent."""
    power, val = 0, 1
    while value >= val and power < 40:
        power, val = power + 1, val * 10
    if power < width - 2:
        return "%*.2f" % (width, value)
    if power < width - 1:
        return "%*.1f" % (width, value)
    if power < width + 1:
        return "%*.0f" % (width, value)
    return "%*.1e" % (width, value)


def params_line(layout: str, o: Options) -> str:
    step = o.step_factor if o.step_factor > 1 else o.step_bytes
    line = (
        "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d "
        "agg iters: %d validation: %d graph: %d"
        % (
            o.nthreads,
            o.ngpus,
            o.min_bytes,
            o.max_bytes,
            step,
            "factor" if o.step_factor > 1 else "bytes",
            o.warmup_iters,
            o.iters,
            o.agg_iters,
            o.check,
            o.graph,
        )
    )
    if layout != "2.17":
        line += " unalign: %d" % o.unalign
    return line + "\n"


def header_lines(o: Options) -> str:
    """writeResultHeader (without -I)."""
    t = "cputime" if o.cputime else "time"
    pad, lbl, fmt = (19, "timestamp", "%Y-%m-%d %H:%M:%S") if o.timestamps else (0, "", "")
    cols = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
    return (
        "#\n"
        + "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
        % ("", "", "", "", "")
        + cols
        % (
            "size",
            "count",
            "type",
            "redop",
            "root",
            t,
            "algbw",
            "busbw",
            "#wrong",
            t,
            "algbw",
            "busbw",
            "#wrong",
            pad,
            lbl,
        )
        + cols
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", pad, fmt)
    )


def rank_line(rank: int, pid: int, host: str, dev: int, model: str) -> str:
    bus = BUS_IDS[dev] if dev < len(BUS_IDS) else "%02x" % (0x10 + 0x10 * dev)
    return "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0000:%s:00] %s\n" % (rank, 0, pid, host, dev, bus, model)


class JsonReport:
    """util.cu's hand-written JSON (jsonKey/jsonStr/...): compact, doubles as %lf, booleans as the
    strings "true"/"false", '/' escaped, a string cut at the first non-printable character."""

    def __init__(self, fp) -> None:
        self.fp, self.states = fp, []

    @staticmethod
    def sanitize(text: str) -> str:
        out = []
        for ch in text:
            if ch in '"\\/':
                out.append("\\" + ch)
            elif ch == "\t":
                out.append("\\t")
            elif ch == "\n":
                out.append("\\n")
            elif ord(ch) >= 0x7F or ord(ch) <= 0x1F:
                break
            else:
                out.append(ch)
        return "".join(out)

    def _value(self) -> None:
        top = self.states[-1] if self.states else None
        if top == "list_empty":
            self.states[-1] = "list_some"
        elif top == "list_some":
            self.fp.write(",")
        elif top == "key":
            self.states.pop()

    def key(self, name: str) -> JsonReport:
        if self.states[-1] == "object_empty":
            self.states[-1] = "object_some"
        else:
            self.fp.write(",")
        self.fp.write('"%s":' % self.sanitize(name))
        self.states.append("key")
        return self

    def start_object(self) -> None:
        self._value()
        self.fp.write("{")
        self.states.append("object_empty")

    def start_list(self) -> None:
        self._value()
        self.fp.write("[")
        self.states.append("list_empty")

    def finish(self) -> None:
        """jsonFinishCurrent: close the innermost object or list (a dangling key gets null)."""
        top = self.states.pop()
        if top == "key":
            self.fp.write("null")
        else:
            self.fp.write("}" if top.startswith("object") else "]")

    def null(self) -> None:
        self._value()
        self.fp.write("null")

    def str_(self, text: str | None) -> None:
        if text is None:
            return self.null()
        self._value()
        self.fp.write('"%s"' % self.sanitize(text))

    def bool_(self, flag: bool) -> None:
        self.str_("true" if flag else "false")

    def int_(self, value: int) -> None:
        self._value()
        self.fp.write("%d" % value)

    def double(self, value: float) -> None:
        self._value()
        self.fp.write('"nan"' if value != value else "%f" % value)

    @classmethod
    def open(cls, path: str | None, argv: list[str], nccl_version: int) -> JsonReport | None:
        """jsonOutputInit, for a path ending in .json (classifyOutputFile); else no report at all."""
        if not path or not re.search(r"\.[^./]+$", path) or not path.lower().endswith(".json"):
            return None
        try_path, n = path, 0
        while True:
            try:
                fp = open(try_path, "x")  # noqa: SIM115 (the report stays open until close())
                break
            except FileExistsError:
                try_path, n = f"{path}.{n}", n + 1
            except OSError:
                write_out(f"# skipping json output; {try_path} not accessible\n")
                return None
        write_out(f"# Writing JSON output to {try_path}\n")
        r = cls(fp)
        r.start_object()
        r.key("version").int_(2)
        r.key("start_time").str_(time.strftime("%Y-%m-%d %H:%M:%S"))
        r.key("args").start_list()
        for a in argv:
            r.str_(a)
        r.finish()
        r.key("env").start_list()
        for k, v in os.environ.items():
            r.str_(f"{k}={v}")
        r.finish()
        r.key("nccl_version").int_(nccl_version)
        return r

    def close(self) -> None:
        """jsonOutputFinalize (version 2): end_time at top level, then close whatever is open."""
        if len(self.states) == 1 and self.states[0].startswith("object"):
            self.key("end_time").str_(time.strftime("%Y-%m-%d %H:%M:%S"))
        while self.states:
            self.finish()
        self.fp.close()
