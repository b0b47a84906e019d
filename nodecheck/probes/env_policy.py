"""What of a job's environment may reach a probe that runs as root on a node, and why the rest stays
behind: the rules, whoever read the environment (a --job-env file, a JOB.yml, a playbook's `env:`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from nodecheck.core.redact import is_secret_name

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z", re.ASCII)  # \Z: "$" would let "NAME\n" through


# What of a job's environment reaches a node for a test that runs the job's communication stack
# (nccl-tests): the variables of the libraries under it, by prefix, and the library path they load
# from. Nothing else travels: the job's tokens, passwords and cloud keys (HF_TOKEN, WANDB_API_KEY,
# AWS_*) have no business on a node's command line or in a report, and PATH or LD_PRELOAD would
# change which program nodecheck runs as root. A name that looks secret (redact.is_secret_name)
# stays behind even with one of these prefixes. The values travel on the probe's stdin, never argv.
TEST_ENV_PREFIXES = (
    "NCCL_",
    "TORCH_",
    "CUDA_",
    "NVIDIA_",
    "UCX_",
    "OMPI_",
    "PMIX_",
    "HCOLL_",
    "SHARP_",
    "MELLANOX_",
    "MLX5_",
    "FI_",
    "GLOO_",
)
TEST_ENV_NAMES = frozenset({"LD_LIBRARY_PATH"})

# Who chose a variable matters. The test runs as root (often over SSH, as the Prolog): a variable that
# names a library, plugin, module directory, program or file makes root load the job's code
# (LD_LIBRARY_PATH, NCCL_NET_PLUGIN, OMPI_MCA_mca_base_component_path, UCX_MODULE_DIR,
# CUDA_INJECTION64_PATH), run its program (OMPI_MCA_plm_rsh_agent), or create, truncate or read a file
# of its choosing (NCCL_DEBUG_FILE=/etc/passwd, NCCL_TOPO_FILE). So from the JOB (--job-env) such a
# variable never travels, by two rules: (1) its name has a word (split at "_", any case) that says
# what it names: PATH, DIR, FILE, PLUGIN, LIB, AGENT, PREFIX, ... (LOADING_WORDS; or a word ending in
# DIR/PATH/FILE: TMPDIR), or it is LD_LIBRARY_PATH; (2) its value looks like a path or a URI (holds a
# "/") and the name is not one known to take a "/" that names no file (an address range 10.0.0.0/16,
# a MIG device MIG-GPU-.../7/0). Tuning (NCCL_IB_HCA=mlx5_0:1, NCCL_SOCKET_IFNAME=ib0, NCCL_ALGO=Ring,
# OMPI_MCA_pml=ucx) travels. The test then runs without them, the report names them (never their
# values) with LOADS_OR_WRITES, and the verdict says so: the operator knows the job's plugin was not
# what was tested. The operator's own playbook `env:` is trusted input and may set any of them
# (a site's aws-ofi-nccl plugin); where the job's value is refused, the operator's stays.
LOADING_WORDS = frozenset(
    {
        "PATH",
        "PATHS",
        "DIR",
        "DIRS",
        "FILE",
        "FILES",
        "PLUGIN",
        "PLUGINS",
        "LIB",
        "LIBS",
        "LIBRARY",
        "LIBRARIES",
        "PRELOAD",
        "AGENT",
        "CMD",
        "COMMAND",
        "EXE",
        "EXEC",
        "PROGRAM",
        "SCRIPT",
        "HOME",
        "ROOT",
        "PREFIX",
        "URI",
    }
)
_LOADING_SUFFIXES = ("DIR", "PATH", "FILE", "FILES")
# names whose values hold a "/" that names no file: address ranges (NCCL's, Open MPI's if_include /
# if_exclude, CIDR) and device selections (a MIG device's GPU-uuid/GI/CI)
SLASH_NAMES = frozenset({"NCCL_IB_ADDR_RANGE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})
_SLASH_NAME = re.compile(r"(OMPI|PMIX|PRTE)_MCA_\w*_if_(include|exclude)\Z", re.ASCII)
_CIDR = re.compile(r"[0-9A-Fa-f:.]+/[0-9]{1,3}\Z", re.ASCII)

NOT_NEEDED = "not a variable the test needs"
SECRET_NAME = "its name looks secret"
LOADS_OR_WRITES = "names a library, plugin, program or file that nodecheck would load, run, read or write as root"


def travels(name: str) -> bool:
    """Whether the variable `name` may reach a node for a test (TEST_ENV_PREFIXES, TEST_ENV_NAMES,
    and never a secret-looking name), whoever set it."""
    return (name.startswith(TEST_ENV_PREFIXES) or name in TEST_ENV_NAMES) and not is_secret_name(name)


def job_refuses(name: str, value: str) -> str:
    """Why the JOB's `name`=`value` stays behind (NOT_NEEDED, SECRET_NAME, LOADS_OR_WRITES); "" when it
    travels."""
    if not travels(name):
        return SECRET_NAME if is_secret_name(name) else NOT_NEEDED
    if name == "LD_LIBRARY_PATH" or _loading_name(name) or (_path_like(value) and not _slash_name(name)):
        return LOADS_OR_WRITES
    return ""


def _loading_name(name: str) -> bool:
    words = name.upper().split("_")
    return any(w in LOADING_WORDS or w.endswith(_LOADING_SUFFIXES) for w in words)


def _slash_name(name: str) -> bool:
    return name in SLASH_NAMES or _SLASH_NAME.match(name) is not None


def _path_like(value: str) -> bool:
    """A "/" outside address ranges (10.0.0.0/16, fd00::/64): a path, a URI, a device path."""
    return any("/" in item and not _CIDR.match(item) for item in re.split(r"[,\s]+", value))


def probe_env(env: Mapping[str, str], job: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(the variables that travel: the operator's `env` (travels) with the job's over it (job_refuses),
    {name left behind: why}, sorted by name). A job's variable refused for what it names leaves the
    operator's value of it in place."""
    kept = {k: v for k, v in env.items() if travels(k)}
    left = {k: SECRET_NAME if is_secret_name(k) else NOT_NEEDED for k in env if not travels(k)}
    for k, v in (job or {}).items():
        why = job_refuses(k, v)
        if why:
            left[k] = why
        else:
            kept[k] = v
            left.pop(k, None)
    return kept, dict(sorted(left.items()))


# The `env:` blocks of playbook checks (nccl.env, nccl.allreduce_*): the same names as the file, values
# as the shell would see them.


def _env_name(name: str) -> str:
    if not ENV_NAME.match(name):
        raise ValueError(f"{name!r} is not an environment variable name (letters, digits, _)")
    return name


def _env_text(value: Any) -> Any:
    """YAML reads `TORCH_NCCL_TRACE_BUFFER_SIZE: 2000` as a number: take it as the shell would see it.
    A YAML boolean is refused: `on`/`yes` would become "True", which no tool reads as 1."""
    if isinstance(value, bool):
        raise ValueError("a YAML boolean is not an environment value: quote it ('1' or '0')")
    return str(value) if isinstance(value, (int, float)) else value


def _env_value(value: str) -> str:
    if "\0" in value:
        raise ValueError("an environment value cannot hold a NUL byte")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_env_text), AfterValidator(_env_value)]
