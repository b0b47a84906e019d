"""One nccl-tests process (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf): alone
it drives -g GPUs of its node; under a launcher it is one rank, meeting the others at every step
through its link to the launcher's coordinator. Only world rank 0 prints, as nccl-tests does."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time

from nccl_tests.model import COLLECTIVES, Collective, curve, step_sizes
from nccl_tests.options import OPS, TYPES, Options, parse_options
from nccl_tests.output import JsonReport, float_str, header_lines, params_line, rank_line
from nccl_tests.state import COORD_ENV, HARD_CAP_S, Ctx, NodeSpec, die_with_parent, nccl_code, write_err, write_out

# Line of `TESTCHECK(result);` in main() of src/common.cu: the " .. HOST pid N: Test failure
# common.cu:L" line every process prints when run() fails. Counted in the stored 2.17.x common.cu
# (the revision that goes with 2.17.9's common.h: JSON output, -M, 2.29 device API); the newer
# layout's file was not counted and reuses it.
MAIN_TESTCHECK_LINE = 1189


class Link:
    """This process's connection to the coordinator: hello -> registry, then barriers (each one a
    gather of one value per process)."""

    def __init__(self, coord: str, my_address: str, proc: int, nprocs: int) -> None:
        self.proc, self.nprocs = proc, nprocs
        host, _, port = coord.rpartition(":")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.bind((my_address, 0))
            self.sock.connect((host, int(port)))
        except OSError:
            write_err(f"fake nccl-tests: cannot reach the launcher at {coord}\n")
            os._exit(1)
        self.rfile = self.sock.makefile("rb")

    def send(self, obj: dict) -> None:
        try:
            self.sock.sendall(json.dumps(obj).encode() + b"\n")
        except OSError:
            self.lost()

    def recv(self) -> dict:
        try:
            line = self.rfile.readline()
        except OSError:
            line = b""
        if not line:
            self.lost()
        return json.loads(line)

    def lost(self) -> None:
        """The launcher went away (or aborted the job): end quietly, as a killed rank would."""
        sys.stdout.flush()
        os._exit(1)

    def hello(self, info: dict) -> list[dict]:
        self.send({"op": "hello", "proc": self.proc, **info})
        return self.recv()["procs"]

    def barrier(self, tag: str, value=None) -> list:
        self.send({"op": "barrier", "proc": self.proc, "tag": tag, "value": value})
        return self.recv()["values"]

    def bye(self) -> None:
        self.send({"op": "bye", "proc": self.proc})
        self.sock.close()

    def wait_closed(self) -> None:
        try:
            while self.sock.recv(4096):
                pass
        except OSError:
            pass


def hang(link: Link | None) -> None:
    """A hung rank: it waits until its coordinator connection closes (or the hard cap), then exits."""
    sys.stdout.flush()
    if link is not None:
        link.wait_closed()
    else:
        time.sleep(HARD_CAP_S)
    os._exit(1)


def launcher_env() -> tuple[str | None, int, int]:
    """(coordinator, this process's world rank, world size) from the launcher's environment."""
    coord = os.environ.get(COORD_ENV)
    if not coord:
        return None, 0, 1
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank_var in os.environ and size_var in os.environ:
            return coord, int(os.environ[rank_var]), int(os.environ[size_var])
    return None, 0, 1


def nccl_debug_level() -> int:
    """NCCL_DEBUG: NONE 0, VERSION 1, WARN 2, INFO 3, ABORT 4, TRACE 5."""
    return {"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 4, "TRACE": 5}.get(os.environ.get("NCCL_DEBUG", "").upper(), 0)


def perf_main(ctx: Ctx, tool: str, argv0: str, args: list[str]) -> int:
    """main() and run() of nccl-tests' common.cu for one process, phase by phase; each phase that
    needs every process is a barrier through the launcher's coordinator (none when alone)."""
    me = ctx.state.node(ctx.node)
    lib_code = nccl_code(me.nccl_version)
    ntypes = 12 if lib_code >= 22400 else 10 if lib_code >= 21000 else 9  # fp8 from 2.24, bf16 2.10
    parsed = parse_options(ctx.state.layout, argv0, args, ntypes)
    if isinstance(parsed, int):
        return parsed
    coord, proc, nprocs = launcher_env()
    if coord:
        die_with_parent()
        if os.getppid() == 1:
            return 1
    run = PerfRun(ctx, me, COLLECTIVES[tool], parsed, proc, lib_code, ntypes)
    run.report = JsonReport.open(parsed.output_file, [argv0, *args], lib_code) if proc == 0 else None
    run.print_header()
    if me.hang == "start":  # the node's processes never join
        hang(None)
    run.link = Link(coord, ctx.address, proc, nprocs) if coord else None
    if not run.device_report():
        return trace_failure(ctx, 5)  # writeDeviceReport's testNotImplemented
    run.nccl_init()
    errors, bw_failed = run.sweep()
    if errors or bw_failed:
        return trace_failure(ctx, 7)  # run() returns testNumResults
    return 0


class PerfRun:
    def __init__(
        self, ctx: Ctx, me: NodeSpec, coll: Collective, o: Options, proc: int, lib_code: int, ntypes: int
    ) -> None:
        self.ctx, self.me, self.coll, self.o, self.proc = ctx, me, coll, o, proc
        self.lib_code, self.ntypes = lib_code, ntypes
        self.pid = os.getpid()
        self.report: JsonReport | None = None
        self.link: Link | None = None
        self.procs: list[dict] = []
        self.first_dev = 0

    def say(self, text: str) -> None:
        """PRINT: only the main thread of process 0 prints."""
        if self.proc == 0:
            write_out(text)

    def barrier(self, tag: str, value=None) -> list:
        return self.link.barrier(tag, value) if self.link else [value]

    def print_header(self) -> None:
        o, state = self.o, self.ctx.state
        self.say(
            "# nccl-tests version %s nccl-headers=%d nccl-library=%d\n"
            % (state.tests_version, nccl_code(state.spec["nccl_version"]), self.lib_code)
        )
        self.say("# Collective test starting: %s\n" % self.coll.name)
        self.say(params_line(state.layout, o))
        if o.blocking == 1 or (o.blocking and state.layout == "2.17"):
            self.say("# Blocking Enabled: wait for completion and barrier after each collective \n")
        elif o.blocking > 1:
            self.say("# Blocking Enabled: wait for completion after each collective (no barrier) \n")
        if o.parallel_init:
            self.say("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n")

    def device_report(self) -> bool:
        """The rendezvous, then every process's rank lines, printed by process 0 (MPI_Gather).
        False: this process asked for more GPUs than its node has."""
        o = self.o
        info = {"host": self.ctx.node, "pid": self.pid, "nthreads": o.nthreads, "ngpus": o.ngpus}
        self.procs = self.link.hello(info) if self.link else [{"proc": 0, **info}]
        self.say("#\n")
        if self.report:
            self._json_config()
        self.say("# Using devices\n")
        per_proc = o.nthreads * o.ngpus
        local_rank = sum(1 for p in self.procs if p["host"] == self.ctx.node and p["proc"] < self.proc)
        gpu0 = os.environ.get("NCCL_TESTS_DEVICE", "")
        self.first_dev = int(gpu0) if gpu0.isdigit() else local_rank * per_proc
        if self.first_dev + per_proc > self.me.gpus:
            write_err(
                "Invalid number of GPUs: %d requested but only %d were found.\n"
                % (self.first_dev + per_proc, self.me.gpus)
            )
            write_err("Please check the number of processes and GPUs per process.\n")
            return False
        lines = [
            rank_line(self.proc * per_proc + i, self.pid, self.ctx.node, self.first_dev + i, self.me.gpu_model)
            for i in range(per_proc)
        ]
        every = self.barrier("devices", lines)
        for proc_lines in every:
            self.say("".join(proc_lines))
        if self.report:
            self._json_devices(every)
        return True

    def nccl_init(self) -> None:
        """run() after the device report: the memory limit, then NCCL's communicator init, where
        NCCL prints its version (init.cc showVersion: NCCL_DEBUG=VERSION or WARN the plain line,
        rank 0's process only; INFO and up an INFO line from every process)."""
        o = self.o
        gib = 1 << 30
        mem = int(self.ctx.state.spec["gpu_memory_bytes"])
        mem_max = (mem - min(-(-mem // (16 * gib)) * gib, 4 * gib) - gib) // (3 if o.check else 2)
        if o.max_bytes > mem_max:
            o.max_bytes = mem_max
            o.min_bytes = min(o.min_bytes, o.max_bytes)
            self.say("#\n# Reducing maxBytes to %d due to memory limitation\n" % o.max_bytes)
        level, version = nccl_debug_level(), "NCCL version " + self.me.nccl_version
        if level > 2:
            write_out("%s:%d:%d [%d] NCCL INFO %s\n" % (self.ctx.node, self.pid, self.pid, self.first_dev, version))
        elif level and self.proc == 0:
            write_out(version + "\n")
        if self.me.hang == "init":
            hang(self.link)
        self.barrier("init")

    def plateau(self) -> float:
        """Bus bandwidth the run reaches for large sizes: the slowest node's network when the run
        crosses nodes; else the node's NVLink, or its network with P2P and SHM switched off."""
        nodes = [self.ctx.state.node(h) for h in sorted({p["host"] for p in self.procs})]
        if len(nodes) > 1:
            return min(n.net_busbw_gbs for n in nodes)
        if os.environ.get("NCCL_P2P_DISABLE") == "1" and os.environ.get("NCCL_SHM_DISABLE") == "1":
            return self.me.net_busbw_gbs
        return self.me.nvlink_busbw_gbs

    def sweep(self) -> tuple[int, bool]:
        """The table, one barrier per row, and the summary. (errors of all processes, avg bw failed)."""
        o, coll = self.o, self.coll
        nranks = sum(p["nthreads"] * p["ngpus"] for p in self.procs)
        plateau, factor = self.plateau(), coll.factor(nranks, dict(os.environ))
        nodes = [self.ctx.state.node(h) for h in {p["host"] for p in self.procs}]
        corrupt_from = min((n.corrupt_from_bytes for n in nodes if n.corrupt), default=None)
        self.say(header_lines(o))
        if self.report:
            self.report.key("results").start_list()
        types = range(self.ntypes) if o.datatype == -1 else [o.datatype]
        ops = [None] if not coll.reduces else (range(len(OPS)) if o.op == -1 else [o.op])
        cycles = o.run_cycles if o.run_cycles > 0 else 1000
        steps = [(t, op, size) for _ in range(cycles) for t in types for op in ops for size in step_sizes(o)]
        dt = float(self.ctx.state.spec["test_s"]) / max(1, len(steps))
        errors, bw = 0, []
        for k, (t, op, size) in enumerate(steps):
            time.sleep(dt)
            if self.me.hang == "sweep" and size >= self.me.hang_at_bytes:
                hang(self.link)
            self.barrier(f"s{k}")
            type_name, elt = TYPES[t]
            nbytes, count = coll.counts(size, elt, nranks)
            usec, algbw, busbw = curve(plateau, nbytes, factor)
            wrong = nbytes // elt // 1000 + 1 if corrupt_from is not None and nbytes >= corrupt_from else 0
            # alltoall does not check its in-place run (alltoall.cu: reportErrors = in_place ? 0 : 1)
            checked = [bool(o.check), bool(o.check) and coll.name != "alltoall_perf"]
            self.say(
                self._row(
                    nbytes, count, type_name, OPS[op] if op is not None else "none", usec, algbw, busbw, wrong, checked
                )
            )
            errors += sum(1 for c in checked if c and wrong)
            bw += [busbw, busbw]
        total_errors = sum(self.barrier("done", errors))  # MPI_Allreduce of errors
        avg = sum(bw) / len(bw) if bw else float("nan")
        min_bw = os.environ.get("NCCL_TESTS_MIN_BW")
        check_avg = float(min_bw) if min_bw else -1.0
        bw_failed = check_avg != -1 and avg < check_avg * 0.9
        self.say("# %-20s : %d %s\n" % ("Out of bounds values", total_errors, "FAILED" if total_errors else "OK"))
        self.say(
            "# %-20s : %g %s\n" % ("Avg bus bandwidth", avg, "" if check_avg == -1 else "FAILED" if bw_failed else "OK")
        )
        self.say("#\n# Collective test concluded: %s\n" % coll.name)
        self.say("#\n")  # finalizeFooter
        self.say("\n")  # writeErrors: ncclGetLastError() is ""
        if self.report:
            self._json_footer(total_errors, avg, check_avg, bw_failed)
        if self.link:
            self.link.bye()
        return total_errors, bw_failed

    def _row(
        self,
        nbytes: int,
        count: int,
        type_name: str,
        op_name: str,
        usec: float,
        algbw: float,
        busbw: float,
        wrong: int,
        checked: list[bool],
    ) -> str:
        """writeBenchmarkLinePreamble + writeBenchmarkLineBody (out of place, in place)."""
        r = self.report
        row = "%12d  %12d  %8s  %6s  %6s" % (nbytes, count, type_name, op_name, "%6i" % -1)
        if r:
            r.start_object()
            for k, v in (("size", nbytes), ("count", count)):
                r.key(k).int_(v)
            for k, v in (("type", type_name), ("redop", op_name), ("root", "%6i" % -1)):
                r.key(k).str_(v)
        for in_place, check in enumerate(checked):
            cols = (float_str(usec, 7), float_str(algbw, 6), float_str(busbw, 6))
            row += "  %7s  %6s  %6s  %6g" % (*cols, wrong) if check else "  %7s  %6s  %6s    N/A" % cols
            if in_place and self.o.timestamps:
                row += "%21s" % time.strftime("%Y-%m-%d %H:%M:%S")
            if r:
                r.key("in_place" if in_place else "out_of_place").start_object()
                r.key("cpu_time" if self.o.cputime else "time").double(usec)
                r.key("alg_bw").double(algbw)
                r.key("bus_bw").double(busbw)
                if check:
                    r.key("nwrong").double(float(wrong))
                else:
                    r.key("nwrong").null()
                r.finish()
        if r:
            r.key("actual_iterations").int_(self.o.iters)
            r.key("experiment_name").str_("")
            r.finish()
        return row + "\n"

    def _json_config(self) -> None:
        o, r = self.o, self.report
        r.key("config").start_object()
        for k, v in (
            ("nthreads", o.nthreads),
            ("ngpus", o.ngpus),
            ("minimum_bytes", o.min_bytes),
            ("maximum_bytes", o.max_bytes),
        ):
            r.key(k).int_(v)
        if o.step_factor > 1:
            r.key("step_factor").int_(o.step_factor)
        else:
            r.key("step_bytes").int_(o.step_bytes)
        for k, v in (
            ("warmup_iters", o.warmup_iters),
            ("iterations", o.iters),
            ("aggregated_iterations", o.agg_iters),
            ("validation", o.check),
            ("graph", o.graph),
        ):
            r.key(k).int_(v)
        r.key("blocking_collectives").bool_(bool(o.blocking))
        r.key("per_iter_timing").bool_(False)
        r.key("parallel_init").bool_(bool(o.parallel_init))

    def _json_devices(self, every: list[list[str]]) -> None:
        """util.cu parseRankInfo reads the FIRST rank line of each process only."""
        r = self.report
        r.key("devices").start_list()
        for proc_lines in every:
            m = re.match(
                r"#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([^]]*)\] (.*)\n", proc_lines[0]
            )
            if m:
                r.start_object()
                for k, v in zip(("rank", "group", "pid"), m.groups()[:3]):
                    r.key(k).int_(int(v))
                r.key("hostname").str_(m.group(4))
                r.key("device").int_(int(m.group(5)))
                r.key("device_hex").str_(m.group(6))
                r.key("device_info").str_(m.group(7))
                r.finish()
        r.finish()
        r.finish()  # config

    def _json_footer(self, errors: int, avg: float, check_avg: float, bw_failed: bool) -> None:
        """writeResultFooter, writeErrors, jsonOutputFinalize."""
        r = self.report
        r.finish()  # results
        r.key("out_of_bounds").start_object()
        r.key("count").int_(errors)
        r.key("okay").bool_(errors == 0)
        r.finish()
        r.key("average_bus_bandwidth").start_object()
        r.key("bandwidth").double(avg)
        if check_avg == -1:
            r.key("okay").str_("unchecked")
        else:
            r.key("okay").bool_(not bw_failed)
        r.finish()
        r.key("errors").start_list()
        r.str_("")
        r.finish()
        r.close()


def trace_failure(ctx: Ctx, code: int) -> int:
    """main(): TESTCHECK(result) traces the failure on stdout, then main returns the code."""
    write_out(" .. %s pid %d: Test failure %s:%d\n" % (ctx.node, os.getpid(), "common.cu", MAIN_TESTCHECK_LINE))
    return code
