"""Read a job's environment file (`--job-env FILE`): KEY=VALUE lines as a job script sources them.

The file is what a batch script would `source` (or `set -a; . FILE`) before it starts the job:
blank lines, `#` comments, an optional leading `export `, values quoted the shell way. nodecheck
does not run the file, so anything the shell would compute (`$VAR`, `${VAR}`, `$(cmd)`, backticks,
a leading `~`) is refused with the line that holds it: a value nodecheck cannot know is not guessed.
A key set twice keeps its last value, as the shell does. An unquoted `;`, `&`, `|`, `<`, `>`, `(` or
`)` is refused too: the shell would end the value there.
"""
from __future__ import annotations

import io
import re
import shlex
from typing import Annotated, Any, Mapping

from pydantic import AfterValidator, BeforeValidator

from nodecheck.core.errors import ConfigError
from nodecheck.core.redact import is_secret_name

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z", re.ASCII)   # \Z: "$" would let "NAME\n" through
_ASSIGNMENT = re.compile(r"^(export[ \t]+)?([^=\s]*)=")
# after an unquoted or double-quoted `$`: what the shell expands (a name, ${...}, $(...), $1, $@ ...)
_EXPANDS = re.compile(r"[A-Za-z_{(0-9@*#?$!-]")
NOT_RUN = "nodecheck reads this file, it does not run it"


# What of a job's environment reaches a node for a test that runs the job's communication stack
# (nccl-tests): the variables of the libraries under it, by prefix, and the library path they load
# from. Nothing else travels: the job's tokens, passwords and cloud keys (HF_TOKEN, WANDB_API_KEY,
# AWS_*) have no business on a node's command line or in a report, and PATH or LD_PRELOAD would
# change which program nodecheck runs as root. A name that looks secret (redact.is_secret_name)
# stays behind even with one of these prefixes. The values travel on the probe's stdin, never argv.
TEST_ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "NVIDIA_", "UCX_", "OMPI_", "PMIX_", "HCOLL_", "SHARP_",
                     "MELLANOX_", "MLX5_", "FI_", "GLOO_")
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
LOADING_WORDS = frozenset({"PATH", "PATHS", "DIR", "DIRS", "FILE", "FILES", "PLUGIN", "PLUGINS", "LIB", "LIBS",
                           "LIBRARY", "LIBRARIES", "PRELOAD", "AGENT", "CMD", "COMMAND", "EXE", "EXEC", "PROGRAM",
                           "SCRIPT", "HOME", "ROOT", "PREFIX", "URI"})
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


def load_job_env(path: str) -> dict[str, str]:
    """{KEY: VALUE} of the file; ConfigError (file, line, hint) for anything a plain reading cannot
    settle. Later lines win over earlier ones."""
    text = _read(path)
    env: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), 1):
        parsed = _parse_line(line, path, number)
        if parsed is not None:
            env[parsed[0]] = parsed[1]
    return env


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ConfigError("job environment file not found", file=path,
                          hint="give the path of a KEY=VALUE file, as the job script sources it") from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a job environment file", file=path) from None
    except OSError as e:
        raise ConfigError(f"cannot read the job environment file: {e.strerror}", file=path,
                          hint="check its permissions") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ConfigError(f"not UTF-8 text (byte {raw[e.start]:#04x})", file=path, line=line,
                          hint="save the file as UTF-8") from None


def _parse_line(line: str, path: str, number: int) -> tuple[str, str] | None:
    def error(message: str, hint: str) -> ConfigError:
        return ConfigError(message, file=path, line=number, hint=hint)

    if line.endswith("\r"):
        raise error("the line ends with a carriage return (a Windows file): the shell would keep it "
                    "in the value", "convert the file to Unix line endings (dos2unix)")
    if "\0" in line:
        raise error("a NUL byte: no environment value can hold one", "remove it")
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    match = _ASSIGNMENT.match(stripped)
    if match is None:
        raise error(f"not a KEY=VALUE line: {_quote(stripped)}",
                    f"{NOT_RUN}; write each variable as KEY=VALUE (optionally after `export `)")
    key = match.group(2)
    if not ENV_NAME.match(key):
        raise error(f"{_quote(key)} is not a variable name (letters, digits and _, not starting with a digit)",
                    "write KEY=VALUE; `+=` and array syntax are not read")
    rest = stripped[match.end():]
    _refuse_expansion(rest, key, error)
    value, after = _first_word(rest, key, error)
    if after and not after.startswith("#"):
        raise error(f"{key}: more than one word after '=' ({_quote(after)}): the shell would run it as a command",
                    "quote the value if it has spaces: KEY=\"a b\"")
    return key, value


def _first_word(rest: str, key: str, error) -> tuple[str, str]:
    """(the value, what follows it on the line). Quoting is undone by shlex, the shell's rules; a
    `#` ends the line only where it starts a word, as in the shell (a#b is one word)."""
    if not rest or rest[0] in " \t":
        return "", rest.strip()                # KEY= alone (or KEY= # comment): the empty string
    lexer = shlex.shlex(io.StringIO(rest), posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        value = lexer.get_token()
    except ValueError as e:                    # "No closing quotation", "No escaped character"
        raise error(f"{key}: {str(e)[0].lower() + str(e)[1:]}",
                    "close the quote on the same line; a value spread over lines is not read") from None
    return value or "", lexer.instream.read().strip()


def _refuse_expansion(rest: str, key: str, error) -> None:
    """Walk the raw value with the shell's quoting: `$` and backticks expand outside single quotes."""
    quote = ""
    i = 0
    while i < len(rest):
        c = rest[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1                             # the next character is literal (in "..." too, for $ and `)
        elif c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif c == "`" or (c == "$" and i + 1 < len(rest) and _EXPANDS.match(rest[i + 1])):
            what = "command substitution" if c == "`" or rest[i + 1] == "(" else "a variable expansion"
            raise error(f"{key}: {what} in {_quote(rest[i:], 20)}: {NOT_RUN}, so it cannot know the value",
                        f"write the value out, or single-quote it if the {'`' if c == '`' else '$'} is literal")
        elif c == "$" and not quote and rest[i + 1:i + 2] in ("'", '"'):
            raise error(f"{key}: bash's {c}{rest[i + 1]}...{rest[i + 1]} quoting in {_quote(rest[i:], 20)}: sh and bash "
                        "read it differently", "write the value in plain single or double quotes")
        elif c in ";&|<>()" and not quote:
            raise error(f"{key}: an unquoted {c!r} in {_quote(rest, 20)}: the shell ends the value there "
                        f"and reads the rest as a command or redirection",
                        f"quote the value if the {c!r} belongs to it: KEY='a{c}b'")
        elif c == "~" and i == 0:
            raise error(f"{key}: a leading ~ is expanded by the shell to a home directory: {NOT_RUN}",
                        "write the absolute path")
        elif c in " \t" and not quote:
            break                              # the value ends here; the rest is checked as the rest
        i += 1


def _quote(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


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
