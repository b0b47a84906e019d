"""nodecheck.core.redact: what counts as a secret and how it is masked wherever nodecheck writes."""

from __future__ import annotations

import time

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


def test_linear_on_hostile_input():
    # one 2 MB word and 200k assignments: the patterns are bounded, so this stays linear
    start = time.monotonic()
    redact_text("A" * 2_000_000)
    redact_text("X=1 " * 200_000)
    redact_text("https://" + "u" * 1_000_000 + " --token" + " " * 100_000)
    assert time.monotonic() - start < 10
