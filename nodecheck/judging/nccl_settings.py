"""How NCCL and PyTorch read their environment variables: which value a job sees (the job's
environment over the node's over NCCL's conf files), NCCL's interface-list syntax, and NCCL's and
PyTorch's readings of numbers and switches. Pure: strings in, values out.

References (cited where used):
- NCCL: docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_SOCKET_IFNAME,
  NCCL_SOCKET_FAMILY, NCCL_IB_HCA), and its src/misc/socket.cc (ncclFindInterfaces),
  src/os/linux.cc (ncclOsFindInterfaces), src/misc/utils.cc (parseStringList, matchIfList) and
  src/misc/param.cc (ncclLoadParam, initEnvFunc).
- PyTorch: docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html
  (TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_BLOCKING_WAIT, TORCH_NCCL_ENABLE_MONITORING,
  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT) and
  c10d's DebugInfoWriter (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, default /tmp/nccl_trace_rank_).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.redact import redact_value
from nodecheck.parsers.nccl_config import NcclConf

JOB, NODE = "job environment", "node environment"
DEFAULT_MASTER_PORT = 29500  # torchrun's and torch.distributed's default MASTER_PORT
# c10d's DebugInfoWriter: getCvarString({"TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}, "/tmp/nccl_trace_rank_");
# PyTorch 2.9 renamed the variables (TORCH_FR_*), and the new names come first, as in getCvarString
DEFAULT_TRACE_FILE = "/tmp/nccl_trace_rank_"
TRACE_FILE_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
TRACE_BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
# PyTorch still reads the names without TORCH_ (deprecated); the TORCH_ name wins when both are set
ASYNC_VARS = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
BLOCKING_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")
# TORCH_NCCL_ASYNC_ERROR_HANDLING's values, from PyTorch's documentation
ASYNC_MODES = {
    "1": "abort the communicator and tear the process down",
    "2": "abort the communicator only",
    "3": "tear the process down without aborting the communicator",
}


# --- the job's environment on a node ----------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    value: str
    source: str  # JOB, NODE or the path of the conf file that set it


Env = Mapping[str, Setting]


def effective_env(
    job: Mapping[str, str], node: Mapping[str, str], use_node: bool, conf: Sequence[NcclConf] = ()
) -> dict[str, Setting]:
    """What the job sees: NCCL's conf files (NCCL_* only: NCCL sets them when it starts, without
    overwriting, so the first file wins and any environment wins over them), the node's variables,
    then the job's over them."""
    env = {k: Setting(v, f.path) for f in reversed(conf) for k, v in f.settings.items() if k.startswith("NCCL_")}
    env.update({k: Setting(v, NODE) for k, v in node.items()} if use_node else {})
    env.update({k: Setting(v, JOB) for k, v in job.items()})
    return env


def said(env: Env, name: str) -> str:
    """`NAME=value (job environment)` or `NAME unset`: every message says where its value came from
    (a secret's value, or credentials in a URL, as redact writes them: messages reach reports)."""
    s = env.get(name)
    return f"{name} unset" if s is None else f"{name}={redact_value(name, s.value)} ({s.source})"


def first_set(env: Env, names: Sequence[str]) -> tuple[str, Setting | None]:
    """The first of `names` that is set (a current name before its deprecated one); the first name and
    None when none is."""
    for name in names:
        if name in env:
            return name, env[name]
    return names[0], None


def socket_family(env: Env) -> str | None:
    """NCCL_SOCKET_FAMILY=AF_INET or AF_INET6 restricts the addresses NCCL considers (ncclEnvSocketFamily)."""
    s = env.get("NCCL_SOCKET_FAMILY")
    return {"AF_INET": "inet", "AF_INET6": "inet6"}.get(s.value) if s else None


# --- NCCL's interface lists (NCCL_SOCKET_IFNAME, NCCL_IB_HCA) ----------------------------------------


@dataclass(frozen=True)
class NcclList:
    """NCCL's list syntax: `^` excludes, then `=` matches names exactly; entries `prefix[:port]`."""

    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int | None], ...]

    def matches(self, name: str, prefix: str) -> bool:
        return name == prefix if self.exact else name.startswith(prefix)

    def selects(self, name: str, port: int | None = None) -> bool:
        """NCCL's `matchIfList(...) ^ searchNot`; a list without entries matches every name
        (matchIfList: `if (listSize == 0) return true`), so `^` alone excludes them all."""
        hit = not self.entries or any(
            self.matches(name, p) and (want is None or port is None or want == port) for p, want in self.entries
        )
        return hit != self.exclude


def parse_nccl_list(value: str) -> NcclList:
    """As NCCL's parseStringList: `,` separates, `:N` is a port (atoi), empty entries are skipped,
    nothing is trimmed (a space is part of the name)."""
    rest = value
    exclude = rest.startswith("^")
    rest = rest[1:] if exclude else rest
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    entries = []
    for part in rest.split(","):
        name, colon, port = part.partition(":")
        if name:
            entries.append((name, _atoi(port) if colon else None))
    return NcclList(exclude, exact, tuple(entries))


def _atoi(text: str) -> int:
    m = re.match(r"\s*([+-]?\d+)", text, re.ASCII)
    return int(m.group(1)) if m else 0


# --- how NCCL and PyTorch read numbers and switches ---------------------------------------------------

_C_SPACE = " \t\n\v\f\r"


def strtoll(text: str) -> int:
    """NCCL's integer parameters (ncclLoadParam: `strtoll(str, nullptr, 0)`, what follows the number
    is ignored, nothing to read is 0): "0x10" is 16, "010" is 8, "yes" is 0."""
    m = re.match(rf"[{_C_SPACE}]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None:
        return 0
    digits = m.group(2)
    value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8) if digits.startswith("0") else int(digits)
    return -value if m.group(1) == "-" else value


def torch_int(text: str) -> int | None:
    """PyTorch's getCvarInt: std::stoi (leading white space, a sign, decimal digits; what follows is
    ignored); None where stoi throws (no number, or out of int range) and PyTorch refuses the value."""
    m = re.match(rf"[{_C_SPACE}]*([+-]?[0-9]+)", text)
    if m is None:
        return None
    value = int(m.group(1))
    return value if -(2**31) <= value < 2**31 else None


_TORCH_TRUE, _TORCH_FALSE = ("y", "yes", "1", "t", "true"), ("n", "no", "0", "f", "false")


def torch_bool(text: str) -> bool | None:
    """PyTorch's getCvarBool: y/yes/1/t/true or n/no/0/f/false in any case, nothing trimmed; None for
    anything else, which PyTorch refuses."""
    lowered = "".join(c.lower() if c.isascii() else c for c in text)  # std::tolower: ASCII only
    return True if lowered in _TORCH_TRUE else False if lowered in _TORCH_FALSE else None


# PyTorch reads every one of these that is set (the deprecated names too) when it creates the NCCL
# process group, and a value it cannot read stops it there ("Invalid value for environment variable")
TORCH_INTS = (*ASYNC_VARS, *TRACE_BUFFER_VARS)
TORCH_BOOLS = (*BLOCKING_VARS, "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_DUMP_ON_TIMEOUT")
