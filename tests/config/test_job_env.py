"""load_job_env: a KEY=VALUE file read the way a job script sources it; every refusal names file:line."""

from __future__ import annotations

import pytest

from nodecheck.config.job_env import load_job_env
from nodecheck.core.errors import ConfigError


def env_file(tmp_path, text: str, name: str = "job.env") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def refusal(tmp_path, text: str) -> ConfigError:
    path = env_file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_job_env(path)
    assert info.value.file == path
    return info.value


def test_a_job_script_style_file_reads_with_the_shells_quoting(tmp_path):
    path = env_file(
        tmp_path,
        (
            "# NCCL for the training job\n"
            "\n"
            "export NCCL_SOCKET_IFNAME=eth0\n"
            "NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'\n"
            '  export TORCH_NCCL_DEBUG_INFO_TEMP_FILE="/scratch/fr dumps/rank_"   # where the dumps go\n'
            "MASTER_PORT=29500 # rendezvous\n"
            "EMPTY=\n"
            "ALSO_EMPTY=''\n"
            "URL=http://host/a#b\n"
            "LITERAL='$HOME and `x`'\n"
            "OPERATORS='a;b|c(d)'\n"
            'DQ="x&y>z"\n'
            "ESCAPED=a\\ b\\$c\n"
            "MIXED=ab\"c d\"'e'\n"
        ),
    )
    assert load_job_env(path) == {
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/scratch/fr dumps/rank_",
        "MASTER_PORT": "29500",
        "EMPTY": "",
        "ALSO_EMPTY": "",
        "URL": "http://host/a#b",
        "LITERAL": "$HOME and `x`",
        "ESCAPED": "a b$c",
        "MIXED": "abc de",
        "OPERATORS": "a;b|c(d)",
        "DQ": "x&y>z",
    }


def test_a_key_set_twice_keeps_the_last_value_silently(tmp_path):
    path = env_file(tmp_path, "NCCL_DEBUG=INFO\nNCCL_DEBUG=WARN\n")
    assert load_job_env(path) == {"NCCL_DEBUG": "WARN"}


def test_an_empty_file_is_an_empty_environment(tmp_path):
    assert load_job_env(env_file(tmp_path, "# nothing set\n\n")) == {}


@pytest.mark.parametrize(
    "line, message, hint",
    [
        (
            "NCCL_SOCKET_IFNAME=$IFACE",
            "NCCL_SOCKET_IFNAME: a variable expansion in '$IFACE': nodecheck reads this "
            "file, it does not run it, so it cannot know the value",
            "write the value out, or single-quote it if the $ is literal",
        ),
        ('MASTER_ADDR="${SLURM_NODELIST%%,*}"', "MASTER_ADDR: a variable expansion in '${SLURM_NODELIST%%,*…':", None),
        ("MASTER_ADDR=$(hostname)", "MASTER_ADDR: command substitution in '$(hostname)':", None),
        (
            "MASTER_ADDR=`hostname -s`",
            "MASTER_ADDR: command substitution in '`hostname -s`':",
            "write the value out, or single-quote it if the ` is literal",
        ),
        ('A="x$1"', "A: a variable expansion in '$1\"':", None),
        (
            "NCCL_CONF_FILE=~/nccl.conf",
            "NCCL_CONF_FILE: a leading ~ is expanded by the shell to a home directory: "
            "nodecheck reads this file, it does not run it",
            "write the absolute path",
        ),
        ("source other.env", "not a KEY=VALUE line: 'source other.env'", None),
        (
            "export NCCL_DEBUG",
            "not a KEY=VALUE line: 'export NCCL_DEBUG'",
            "nodecheck reads this file, it does not run it; write each variable as KEY=VALUE "
            "(optionally after `export `)",
        ),
        ("NCCL_DEBUG = INFO", "not a KEY=VALUE line: 'NCCL_DEBUG = INFO'", None),
        ("1NCCL=x", "'1NCCL' is not a variable name (letters, digits and _, not starting with a digit)", None),
        (
            "PATH+=:/opt/bin",
            "'PATH+' is not a variable name (letters, digits and _, not starting with a digit)",
            "write KEY=VALUE; `+=` and array syntax are not read",
        ),
        (
            "NCCL_SOCKET_IFNAME=eth0 eth1",
            "NCCL_SOCKET_IFNAME: more than one word after '=' ('eth1'): the shell would run it as a command",
            'quote the value if it has spaces: KEY="a b"',
        ),
        (
            "NCCL_IB_HCA='mlx5_0",
            "NCCL_IB_HCA: no closing quotation",
            "close the quote on the same line; a value spread over lines is not read",
        ),
        # the shell ends the value at an unquoted operator: `A=a;b` sets a and runs b
        (
            "NCCL_SOCKET_IFNAME=eth0;reboot",
            "NCCL_SOCKET_IFNAME: an unquoted ';' in 'eth0;reboot': the shell ends the "
            "value there and reads the rest as a command or redirection",
            "quote the value if the ';' belongs to it: KEY='a;b'",
        ),
        ("MASTER_ADDR=node1>/tmp/x", "MASTER_ADDR: an unquoted '>' in 'node1>/tmp/x':", None),
        ("A=x&", "A: an unquoted '&' in 'x&':", None),
        ("A=f(x)", "A: an unquoted '(' in 'f(x)':", None),
        (
            "NCCL_IB_HCA=$'mlx5_0\\n'",
            "NCCL_IB_HCA: bash's $'...' quoting in \"$'mlx5_0\\\\n'\": sh and bash read it differently",
            "write the value in plain single or double quotes",
        ),
    ],
)
def test_refused_lines_name_the_file_the_line_and_the_fix(tmp_path, line, message, hint):
    error = refusal(tmp_path, f"# job env\nNCCL_DEBUG=WARN\n{line}\nNCCL_P2P_LEVEL=NVL\n")
    assert error.line == 3
    assert error.message.startswith(message), error.message
    if hint is not None:
        assert error.hint == hint
    assert str(error).startswith(f"{error.file}:3: ")


def test_a_windows_line_ending_is_refused_at_its_line(tmp_path):
    error = refusal(tmp_path, "NCCL_DEBUG=WARN\r\n")
    assert (error.line, error.hint) == (1, "convert the file to Unix line endings (dos2unix)")
    assert error.message.startswith("the line ends with a carriage return (a Windows file)")


def test_a_nul_byte_is_refused(tmp_path):
    error = refusal(tmp_path, "A=1\nB=x\0y\n")
    assert (error.line, error.message) == (2, "a NUL byte: no environment value can hold one")


def test_text_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "job.env"
    path.write_bytes(b"A=1\nB=caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_job_env(str(path))
    assert (info.value.line, info.value.message, info.value.hint) == (
        2,
        "not UTF-8 text (byte 0xe9)",
        "save the file as UTF-8",
    )


def test_a_missing_file_is_a_config_error(tmp_path):
    path = str(tmp_path / "absent.env")
    with pytest.raises(ConfigError) as info:
        load_job_env(path)
    assert (info.value.file, info.value.line, info.value.message) == (path, None, "job environment file not found")
    assert (
        str(info.value) == f"{path}: job environment file not found; hint: give the path of a KEY=VALUE file, "
        "as the job script sources it"
    )


def test_a_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_job_env(str(tmp_path))
    assert info.value.message == "is a directory, not a job environment file"


def test_an_unreadable_path_is_a_config_error(tmp_path):
    path = env_file(tmp_path, "A=1\n") + "/job.env"  # below a file: the OS refuses it (as root too)
    with pytest.raises(ConfigError) as info:
        load_job_env(path)
    assert (info.value.file, info.value.message, info.value.hint) == (
        path,
        "cannot read the job environment file: Not a directory",
        "check its permissions",
    )


@pytest.mark.parametrize(
    "block, got", [("env: []", ""), ("env:", ", got None"), ("env: 'NCCL_DEBUG=INFO'", ", got 'NCCL_DEBUG=INFO'")]
)
def test_a_playbook_env_that_is_not_a_mapping_is_refused_with_a_job_env_too(tmp_path, block, got):
    from nodecheck.config.playbook import load_playbook

    playbook = tmp_path / "pb.yml"
    playbook.write_text(f"checks:\n  nccl.env:\n    {block}\n")
    for job_env in (None, env_file(tmp_path, "NCCL_DEBUG=WARN\n")):
        with pytest.raises(ConfigError) as info:
            load_playbook(str(playbook), job_env=job_env)
        assert (
            str(info.value) == f"{playbook}:3: checks.nccl.env.env: Input should be a valid dictionary{got} "
            "(check nccl.env)"
        )


def test_the_job_env_goes_over_the_playbooks_env_key_by_key(tmp_path):
    from nodecheck.config.playbook import load_playbook

    playbook = tmp_path / "pb.yml"
    playbook.write_text("checks:\n  nccl.env:\n    env: {NCCL_DEBUG: INFO, NCCL_IB_HCA: mlx5_0}\n")
    book = load_playbook(str(playbook), job_env=env_file(tmp_path, "NCCL_IB_HCA=mlx5_1\nMASTER_PORT=29500\n"))
    assert book.checks[0].params.env == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_1", "MASTER_PORT": "29500"}


def test_a_name_with_a_trailing_newline_is_not_a_name():
    from nodecheck.probes.env_policy import ENV_NAME

    assert ENV_NAME.match("NCCL_DEBUG") is not None
    assert ENV_NAME.match("NCCL_DEBUG\n") is None
    assert ENV_NAME.match("NCCLÄ") is None


def test_only_the_variables_a_test_needs_travel_and_never_a_secret_looking_one():
    """issue 17, finding 3: HF_TOKEN from --job-env reached the node's command line and report.json."""
    from nodecheck.probes.env_policy import probe_env, travels

    env = {
        "NCCL_IB_HCA": "mlx5_0",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "UCX_TLS": "rc",
        "OMPI_MCA_btl": "^openib",
        "LD_LIBRARY_PATH": "/opt/nccl/lib",
        "HF_TOKEN": "s3cr3t",
        "NCCL_IB_PKEY": "0x8001",
        "TORCH_HUB_TOKEN": "s3cr3t",
        "NCCL_SECRET_SAUCE": "x",
        "PATH": "/home/u/bin",
        "LD_PRELOAD": "/tmp/x.so",
        "AWS_SECRET_ACCESS_KEY": "k",
        "MASTER_ADDR": "node1",
    }
    kept, left = probe_env(env)
    assert kept == {
        "NCCL_IB_HCA": "mlx5_0",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "UCX_TLS": "rc",
        "OMPI_MCA_btl": "^openib",
        "LD_LIBRARY_PATH": "/opt/nccl/lib",
        "NCCL_IB_PKEY": "0x8001",
    }
    assert list(left) == [
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
        "LD_PRELOAD",
        "MASTER_ADDR",
        "NCCL_SECRET_SAUCE",
        "PATH",
        "TORCH_HUB_TOKEN",
    ]
    assert (left["HF_TOKEN"], left["PATH"]) == ("its name looks secret", "not a variable the test needs")
    assert not travels("nccl_lowercase") and travels("CUDA_VISIBLE_DEVICES")


# --- what a job may not choose for a test that runs as root (issue 17, slice I) ----------------------------

# each names a library, plugin, module directory, program or file that the test (nccl-tests, mpirun, UCX,
# CUDA), run as root, would load, run, read or write
LOADING = {
    "LD_LIBRARY_PATH": "/home/u/evil",
    "NCCL_NET_PLUGIN": "/home/u/libevil.so",
    "NCCL_TUNER_PLUGIN": "evil",
    "NCCL_PROFILER_PLUGIN": "evil",
    "NCCL_ENV_PLUGIN": "evil",
    "NCCL_DEBUG_FILE": "/etc/passwd",
    "NCCL_TOPO_DUMP_FILE": "topo.xml",
    "NCCL_GRAPH_DUMP_FILE": "graph.xml",
    "NCCL_TOPO_FILE": "/root/t.xml",
    "NCCL_GRAPH_FILE": "g.xml",
    "NCCL_TUNER_CONFIG_FILE": "tuner.conf",
    "NCCL_CONF_FILE": "/home/u/nccl.conf",
    "OMPI_MCA_mca_base_component_path": "/home/u/mca",
    "OMPI_MCA_mca_base_param_files": "mca.conf",
    "OMPI_MCA_plm_rsh_agent": "sh -c evil",
    "OMPI_MCA_orte_launch_agent": "evil",
    "OMPI_MCA_orte_tmpdir_base": "tmp",
    "OMPI_MCA_pml_ucx_plugin": "x",
    "UCX_MODULE_DIR": "/home/u/ucx",
    "UCX_LOG_FILE": "ucx.log",
    "CUDA_INJECTION64_PATH": "/home/u/inj.so",
    "CUDA_CACHE_PATH": "/root/.nv",
    "CUDA_HOME": "/home/u/cuda",
    "TORCH_FR_DUMP_TEMP_FILE": "/tmp/fr_",
    "FI_PROVIDER_PATH": "/home/u/fi",
    "PMIX_MCA_ptl_tcp_report_uri": "uri.txt",
    "HCOLL_LIB": "x",
    # a name nodecheck has never heard of, with a path for a value: not known to be harmless
    "NCCL_SOME_FUTURE_VAR": "/home/u/x",
    "UCX_SOMETHING": "./lib.so",
}
TUNING = {
    "NCCL_IB_HCA": "mlx5_0:1",
    "NCCL_SOCKET_IFNAME": "ib0",
    "NCCL_ALGO": "Ring",
    "NCCL_PROTO": "Simple",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "NCCL_NET": "AWS Libfabric",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_IB_ADDR_RANGE": "10.0.0.0/16",
    "OMPI_MCA_btl_tcp_if_include": "10.0.0.0/8,fd00::/64",
    "OMPI_MCA_pml": "ucx",
    "UCX_NET_DEVICES": "mlx5_0:1",
    "UCX_TLS": "rc,sm",
    "CUDA_VISIBLE_DEVICES": "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0",
    "CUDA_MODULE_LOADING": "LAZY",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}


def test_a_jobs_variable_that_names_a_library_plugin_or_file_stays_behind_and_its_tuning_travels():
    """A root-run test must not dlopen the job's library (LD_LIBRARY_PATH, NCCL_NET_PLUGIN, UCX_MODULE_DIR),
    run its program (OMPI_MCA_plm_rsh_agent) or create/read a file of its choosing (NCCL_DEBUG_FILE=/etc/passwd);
    the operator's playbook `env:` may set them, and keeps its value where the job's is refused."""
    from nodecheck.probes.env_policy import LOADS_OR_WRITES, NOT_NEEDED, SECRET_NAME, job_refuses, probe_env

    operator = {"NCCL_NET_PLUGIN": "aws-ofi", "LD_LIBRARY_PATH": "/opt/aws-ofi-nccl/lib", "NCCL_IB_HCA": "mlx5_1"}
    kept, left = probe_env(operator, {**LOADING, **TUNING, "HF_TOKEN": "s3cr3t", "PATH": "/home/u/bin"})
    assert kept == {"NCCL_NET_PLUGIN": "aws-ofi", "LD_LIBRARY_PATH": "/opt/aws-ofi-nccl/lib", **TUNING}
    assert left == {**dict.fromkeys(sorted(LOADING), LOADS_OR_WRITES), "HF_TOKEN": SECRET_NAME, "PATH": NOT_NEEDED}
    assert list(left) == sorted(left)
    assert (
        LOADS_OR_WRITES == "names a library, plugin, program or file that nodecheck would load, run, read or "
        "write as root"
    )
    for name, value in LOADING.items():
        assert job_refuses(name, value) == LOADS_OR_WRITES, name
    for name, value in TUNING.items():
        assert job_refuses(name, value) == "", name
