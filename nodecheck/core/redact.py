"""Secrets kept out of everything nodecheck writes: reports, captures, history, logs, alerts, records.

nodecheck reads environments it does not own (a job's --job-env file, a rank's /proc environ, a
probe's argv). A value whose *name* looks secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, WANDB_API_KEY,
DB_PASSWORD, ...) is replaced by REDACTED wherever it would be written, and credentials inside a
URL (scheme://user:token@host) are masked whatever the variable is called. Pure functions only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"

# Parts of a variable name that mark its value as a secret. Matched on the upper-cased name, as a
# substring: *TOKEN*, *SECRET*, *PASSWORD*, *KEY* (API_KEY, ACCESS_KEY, SSH_KEY...), and the usual
# spellings of credentials. NCCL/TORCH/CUDA tuning variables contain none of these.
_SECRET_PARTS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "SIGNATURE",
)
_SECRET_NAME = re.compile("|".join(_SECRET_PARTS))
# names that match a part above but hold no secret, and that drift judging needs to show
_NOT_SECRET = frozenset({"NCCL_IB_PKEY", "SSH_AUTH_SOCK", "NCCL_IB_AR_THRESHOLD"})

# scheme://user[:password]@host: the userinfo part goes (a lone user name may be the token itself)
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/@\s]{1,2048}@")
# NAME=value inside free text (an argv, a command line, an env dump, a log field), and the other ways
# a key and its value are printed: NAME = value, a YAML `name: value`, a JSON `"NAME": "value"`, a
# Python dict's `'NAME': 'value'`, an HTTP header `Authorization: Bearer TOKEN`. The key may be quoted
# (the same quote on both sides) and may hold "-" and "." (api-key, x.api_key); the separator is "=" or
# ":" with up to 16 blanks around it, never a comparison or a scope (`key == x`; `ev.key === "Enter"`
# in report.html's own script, which is masked as a whole; `key := x`, `Key::new`). Only a key whose
# name looks secret has its value masked, so a non-secret key="..." (a log's message="...") does not
# hide the assignments quoted inside it, and "step: 100" stays as it is. A key must not follow a
# letter, digit or ":" (a URL's "host:8443" or a time's "12:30" is no key). A secret key's value is
# taken by _VALUE: an auth scheme and its token (Bearer abc), a quoted string (bounded: an unclosed
# quote must not make every later key rescan the line), or a word to the next blank, comma, brace or
# quote (unbounded: a long token is masked whole).
_ASSIGNMENT = re.compile(
    r"""(?<![A-Za-z0-9_.:-])(["']?)([A-Za-z_][A-Za-z0-9_.-]{0,255})\1[ \t]{0,16}(=(?!=)|:(?![:=]))[ \t]{0,16}"""
)
_AUTH_SCHEME = r"(?i:bearer|basic|token|digest|negotiate|bot|apikey)[ \t]{1,16}[^\s\"',}]*"
_VALUE = re.compile(rf"{_AUTH_SCHEME}|\"[^\"\n]{{0,65536}}\"|'[^'\n]{{0,65536}}'|[^\s\"',}}]*")
# --token VALUE / --password=VALUE / --hf-token "VALUE" style options in a command line
_OPTION_NAME = (
    r"--?[A-Za-z0-9_-]{0,64}(?:token|secret|password|passwd|api[-_]?key|key)"
    r"[A-Za-z0-9_-]{0,32}"
)
_OPTION = re.compile(
    rf"({_OPTION_NAME})(=|[ \t]+)(\"[^\"\n]{{0,65536}}\"|'[^'\n]{{0,65536}}'|[^\s\"']+)", re.IGNORECASE
)
_OPTION_ALONE = re.compile(_OPTION_NAME, re.IGNORECASE)
# "KeyError: 'x'", "TokenizerWarning: ...": an exception's name before its message is no key
_EXCEPTION_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*(?:Error|Exception|Warning)")


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, ...)."""
    upper = name.upper()
    return upper not in _NOT_SECRET and bool(_SECRET_NAME.search(upper))


def mask_url_credentials(text: str) -> str:
    """scheme://user:token@host → scheme://***@host, anywhere in text."""
    return _URL_USERINFO.sub(r"\1***@", text)


def redact_value(name: str, value: str) -> str:
    """The value as it may be written: REDACTED for a secret name, URL credentials masked otherwise."""
    if is_secret_name(name):
        return REDACTED
    return mask_url_credentials(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of an environment with every secret value replaced (keys and order kept)."""
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_text(text: str, known_secrets: Iterable[str] = ()) -> str:
    """Free text (a command line, a log line, a capture) with secrets masked: NAME=value where NAME
    looks secret, --token VALUE options, URL credentials, and every literal in known_secrets (the
    values a job's environment declared secret, wherever they were echoed)."""
    out = _redact_assignments(text)
    out = _OPTION.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", out)
    out = mask_url_credentials(out)
    # longest first: a secret that contains another is replaced whole
    for secret in sorted({s for s in known_secrets if len(s) >= 4}, key=len, reverse=True):
        out = out.replace(secret, REDACTED)
    return out


def _redact_assignments(text: str) -> str:
    parts, pos = [], 0
    for m in _ASSIGNMENT.finditer(text):
        name = m.group(2)
        if m.start() < pos or _EXCEPTION_NAME.fullmatch(name) or not is_secret_name(name.replace("-", "_")):
            continue  # inside a value already masked, an exception's name, or nothing to mask
        value = _VALUE.match(text, m.end())
        assert value is not None  # _VALUE matches the empty string
        parts += [text[pos : m.end()], REDACTED]
        pos = value.end()
    parts.append(text[pos:])
    return "".join(parts)


def redact_argv(argv: Iterable[str], known_secrets: Iterable[str] = ()) -> tuple[str, ...]:
    """An argv with secrets masked in each word (NAME=value, --token VALUE across two words)."""
    words = [redact_text(w, known_secrets) for w in argv]
    for i, word in enumerate(words[:-1]):
        if _OPTION_ALONE.fullmatch(word):
            words[i + 1] = REDACTED
    return tuple(words)


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of an environment's secret-named variables (to scrub echoes of them)."""
    return [v for k, v in env.items() if is_secret_name(k) and v]
