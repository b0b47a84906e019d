"""nodecheck.core.redact: what counts as a secret and how it is masked wherever nodecheck writes."""

from __future__ import annotations

import pytest

from nodecheck.core.redact import (
    REDACTED,
    is_secret_name,
    mask_url_credentials,
    redact_argv,
    redact_env,
    redact_text,
    redact_value,
    secret_values,
)
from tests.growth import assert_linear


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "hf_token",
        "AWS_SECRET_ACCESS_KEY",
        "WANDB_API_KEY",
        "DB_PASSWORD",
        "GITHUB_PAT_TOKEN",
        "MY_PASSPHRASE",
        "SSH_PRIVATE_KEY",
        "NETRC_CREDENTIALS",
        "SESSION_COOKIE",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_DEBUG",
        "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_PKEY",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "CUDA_VISIBLE_DEVICES",
        "UCX_TLS",
        "OMPI_MCA_pml",
        "SSH_AUTH_SOCK",
        "LD_LIBRARY_PATH",
    ],
)
def test_tuning_names_are_not_secret(name):
    assert not is_secret_name(name)


def test_env_keeps_names_and_order_and_masks_values():
    env = {"NCCL_DEBUG": "INFO", "HF_TOKEN": "hf_abc123", "MLFLOW_URI": "https://bob:pw@mlflow.local/x"}
    assert redact_env(env) == {"NCCL_DEBUG": "INFO", "HF_TOKEN": REDACTED, "MLFLOW_URI": "https://***@mlflow.local/x"}
    assert list(redact_env(env)) == list(env)
    assert redact_value("NCCL_DEBUG", "INFO") == "INFO"


def test_url_credentials_masked_anywhere_even_a_lone_token_user():
    assert (
        mask_url_credentials("push to https://ghp_TOKEN@github.example/x.git now")
        == "push to https://***@github.example/x.git now"
    )
    assert mask_url_credentials("no credentials: https://host/path") == "no credentials: https://host/path"


def test_command_line_assignments_options_and_known_values():
    line = (
        "env HF_TOKEN=hf_abc123 NCCL_DEBUG=INFO python train.py --hf-token hf_zzz9 --api_key=k1k1 "
        "--lr 3e-4 --data s3://bucket/x echo-of-wandb-9f8e7d"
    )
    out = redact_text(line, known_secrets=["wandb-9f8e7d"])
    for secret in ("hf_abc123", "hf_zzz9", "k1k1", "wandb-9f8e7d"):
        assert secret not in out
    assert "NCCL_DEBUG=INFO" in out and "--lr 3e-4" in out and "s3://bucket/x" in out
    assert f"HF_TOKEN={REDACTED}" in out


def test_argv_option_and_value_in_two_words():
    assert redact_argv(["python", "train.py", "--token", "abcd", "--lr", "3", "A_KEY=1"]) == (
        "python",
        "train.py",
        "--token",
        REDACTED,
        "--lr",
        "3",
        f"A_KEY={REDACTED}",
    )


def test_secret_values_of_an_environment():
    assert secret_values({"HF_TOKEN": "abc", "NCCL_DEBUG": "INFO", "DB_PASSWORD": ""}) == ["abc"]


@pytest.mark.growth
@pytest.mark.parametrize(
    "text",
    [
        lambda n: "A" * n,  # one long word (2 MB at 4n)
        lambda n: "X=1 " * (n // 10),  # assignments (200k at 4n)
        lambda n: "https://" + "u" * (n // 2) + " --token" + " " * (n // 20),  # a URL, an option without value
    ],
    ids=["long-word", "assignments", "url-and-option"],
)
def test_linear_on_hostile_input(text):
    # the patterns are bounded: growth, not seconds (tests/growth.py)
    assert_linear(redact_text, text, 500_000)


# --- issue 32, 1.10: the free-text forms that passed unmasked into log tails, watch samples and
# forensics records
@pytest.mark.parametrize(
    "text, secret",
    [
        ("env: {'HF_TOKEN': 'hf_pydictrepr1'}", "hf_pydictrepr1"),  # a Python dict printed
        ('{"WANDB_API_KEY": "wandbjson22", "lr": 3}', "wandbjson22"),  # JSON
        ('{"WANDB_API_KEY":"wandbjson33"}', "wandbjson33"),  # compact JSON
        ("  api_key: yamlvalue44", "yamlvalue44"),  # YAML
        ("hf-token: yamlvalue55", "yamlvalue55"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1", "eyJhbGciOiJIUzI1"),  # an HTTP header in a log
        ("authorization=Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("python train.py --password 'quoted secret 66'", "quoted secret 66"),
        ('python train.py --hf-token "hf_double77"', "hf_double77"),
        ("python train.py --hf-token='hf_eq88'", "hf_eq88"),
        ("HF_TOKEN = spaced99", "spaced99"),
        ("export HF_TOKEN= lead00", "lead00"),
    ],
)
def test_secrets_in_dicts_json_yaml_headers_and_quoted_options_are_masked(text, secret):
    out = redact_text(text)
    assert secret not in out, out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "step: 100 loss: 2.31 lr: 3e-4",  # a training log's fields
        "time 12:30:01 host: node1",
        "NCCL_IB_PKEY: 0x8001",  # a tuning name that only looks secret
        'message="rank 3 done" NCCL_DEBUG=INFO',
        "https://host:8443/path",
        "KeyError: 'oops'",  # a traceback's last line
        "TokenizerWarning: slow tokenizer",
        'if (ev.key === "Enter" || ev.key == " ") { pick(); }',  # code: a comparison is no assignment
        "assert token != expected",
        "api_key := compute()",
        "Key::new(3)",
    ],
)
def test_ordinary_fields_stay_readable(text):
    assert redact_text(text) == text


@pytest.mark.growth
@pytest.mark.parametrize(
    "make",
    [
        lambda n: '"HF_TOKEN": "' * n,
        lambda n: "api_key: " * n,
        lambda n: "a:" * n,
        lambda n: "--token '" * n,
        lambda n: "Authorization: Bearer " * n,
    ],
    ids=["unclosed-quotes-after-secret-key", "keys-without-values", "colons", "unclosed-option-quotes", "auth"],
)
def test_masking_grows_linearly_on_hostile_input(make):
    """Proved by growth, not by seconds (a busy machine has no fixed speed): the time at 4n stays
    under 8x the time at n for each hostile shape (quadratic would be 16x)."""
    assert_linear(redact_text, make, 20_000)
