"""known_hosts parsing and host-key verdicts: every line counts, the node's name decides, TOFU writes once."""

import base64
import threading

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from nodecheck.transport.known_hosts import KnownHosts, Verdict, host_form, node_names


def make_key(kind: str = "ed25519") -> paramiko.PKey:
    priv = {
        "ed25519": ed25519.Ed25519PrivateKey.generate,
        "ecdsa": lambda: ec.generate_private_key(ec.SECP256R1()),
        "rsa": lambda: rsa.generate_private_key(65537, 2048),
    }[kind]()
    keytype, data = priv.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode().split()
    return paramiko.PKey.from_type_string(keytype, base64.b64decode(data))


def entry(hosts: str, key: paramiko.PKey, marker: str = "") -> str:
    return f"{marker} {hosts} {key.get_name()} {key.get_base64()}".strip()


@pytest.fixture
def known(tmp_path):
    """Writes the given lines to a known_hosts file and loads it."""
    path = tmp_path / "known_hosts"

    def make(*lines: str) -> KnownHosts:
        path.write_text("".join(f"{line}\n" for line in lines))
        return KnownHosts([str(path)])

    make.path = path
    return make


K1, K2, K3 = make_key(), make_key(), make_key()
E1 = make_key("ecdsa")
NODE3 = [["node3"], ["10.0.0.3"]]


def test_stale_line_then_correct_line_matches(known):
    kh = known(entry("node3", K1), entry("node3", K2))
    result = kh.check(NODE3, K2)
    assert result.verdict is Verdict.MATCH
    assert result.detail.endswith(":2")


def test_only_a_different_key_of_the_same_type_is_a_mismatch(known):
    result = known(entry("node3", K1)).check(NODE3, K2)
    assert result.verdict is Verdict.MISMATCH
    assert "different ssh-ed25519 key" in result.detail and "known_hosts:1" in result.detail


def test_only_keys_of_other_types_is_a_mismatch_not_a_first_use(known):
    result = known(entry("node3", E1)).check(NODE3, K1)
    assert result.verdict is Verdict.MISMATCH
    assert "lists only ecdsa-sha2-nistp256" in result.detail


def test_name_entry_decides_over_address_entry(known):
    kh = known(entry("node3", K1), entry("10.0.0.3", K2))
    assert kh.check(NODE3, K2).verdict is Verdict.MISMATCH
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH


def test_address_entry_decides_when_the_name_has_none(known):
    kh = known(entry("10.0.0.3", K2), entry("othernode", K1))
    result = kh.check(NODE3, K2)
    assert result.verdict is Verdict.MATCH
    assert "judged by its address" in result.detail
    assert kh.check(NODE3, K1).verdict is Verdict.MISMATCH


def test_no_entry_for_any_name_is_unknown(known):
    result = known(entry("node4", K1)).check(NODE3, K1)
    assert result.verdict is Verdict.UNKNOWN
    assert "node3 or 10.0.0.3" in result.detail


def test_hashed_entries_match_only_their_host(known):
    kh = known(entry(paramiko.HostKeys.hash_host("node3"), K1), entry(paramiko.HostKeys.hash_host("[node5]:2222"), K2))
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH
    assert kh.check(NODE3, K2).verdict is Verdict.MISMATCH
    assert kh.check([["[node5]:2222"]], K2).verdict is Verdict.MATCH
    assert kh.check([["node5"]], K2).verdict is Verdict.UNKNOWN


def test_non_standard_port_uses_bracketed_form(known):
    kh = known(entry("[node3]:2222", K1), entry("node3", K2))
    assert kh.check(node_names("node3", "10.0.0.3", 2222), K1).verdict is Verdict.MATCH
    assert kh.check(node_names("node3", "10.0.0.3", 2222), K2).verdict is Verdict.MISMATCH
    assert kh.check(node_names("node3", "10.0.0.3", 2200), K1).verdict is Verdict.UNKNOWN
    assert kh.check(node_names("node3", "10.0.0.3"), K2).verdict is Verdict.MATCH


def test_wildcards_and_negation(known):
    kh = known(entry("*.cluster,!bad.cluster", K1), entry("gpu-?", K2))
    assert kh.check([["node3.cluster"]], K1).verdict is Verdict.MATCH
    assert kh.check([["bad.cluster"]], K1).verdict is Verdict.UNKNOWN
    assert kh.check([["node3.cluster.evil"]], K1).verdict is Verdict.UNKNOWN
    assert kh.check([["gpu-7"]], K2).verdict is Verdict.MATCH
    assert kh.check([["gpu-17"]], K2).verdict is Verdict.UNKNOWN


def test_names_match_exactly_but_case_insensitively(known):
    kh = known(entry("Node3,node30", K1))
    assert kh.check([["NODE3"]], K1).verdict is Verdict.MATCH
    assert kh.check([["node"]], K1).verdict is Verdict.UNKNOWN
    assert kh.check([["node3.cluster"]], K1).verdict is Verdict.UNKNOWN


def test_revoked_key_wins_even_when_also_listed_plain(known):
    kh = known(entry("node3", K1), entry("node3,node4", K1, "@revoked"))
    result = kh.check(NODE3, K1)
    assert result.verdict is Verdict.REVOKED
    assert "known_hosts:2" in result.detail


def test_wildcard_revocation_applies_to_every_host_and_only_to_that_key(known):
    kh = known(entry("*", K1, "@revoked"), entry("node3", K1), entry("node4", K2))
    assert kh.check(NODE3, K1).verdict is Verdict.REVOKED
    assert kh.check([["node4"]], K2).verdict is Verdict.MATCH


def test_revocation_for_another_host_does_not_apply(known):
    kh = known(entry("node9", K1, "@revoked"), entry("node3", K1))
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH


def test_bad_lines_are_skipped_with_warnings_and_others_still_count(known):
    kh = known(
        "# comment",
        "",
        entry("*.cluster", K3, "@cert-authority"),
        "this is not a known_hosts line",
        "node3 ssh-ed25519 !!!notbase64",
        "node3 ssh-ed25519 " + base64.b64encode(b"garbage blob").decode(),
        "node3 ssh-dss " + base64.b64encode(b"whatever").decode(),
        "@marker node3 " + f"{K1.get_name()} {K1.get_base64()}",
        "|1|bad|hash ssh-ed25519 " + K1.get_base64(),
        entry("node3", K1),
    )
    path = known.path
    assert kh.warnings == [
        f"{path}:3: @cert-authority ignored (host certificates are not supported)",
        f"{path}:4: cannot parse, ignored",
        f"{path}:5: cannot parse, ignored",
        f"{path}:6: cannot parse, ignored",
        f"{path}:7: unsupported key type ssh-dss, ignored",
        f"{path}:8: cannot parse, ignored",
        f"{path}:9: cannot parse, ignored",
    ]
    assert kh.check([["node3.cluster"], ["node3"]], K1).verdict is Verdict.MATCH


def test_only_cert_authority_lines_leave_the_host_unknown(known):
    result = known(entry("*.cluster", K3, "@cert-authority")).check([["node3.cluster"]], K1)
    assert result.verdict is Verdict.UNKNOWN
    assert "host certificates are not supported" in result.detail and "add the node's host key" in result.detail


def test_missing_file_is_empty_without_warning(tmp_path):
    kh = KnownHosts([str(tmp_path / "absent"), str(tmp_path / "also-absent")])
    assert kh.warnings == []
    assert kh.check(NODE3, K1).verdict is Verdict.UNKNOWN


def test_unreadable_file_is_empty_with_warning(tmp_path, known):
    known(entry("node3", K1))
    kh = KnownHosts([str(tmp_path), str(known.path)])  # a directory cannot be read as a file
    assert kh.warnings == [f"{tmp_path}: cannot read (Is a directory), treated as empty"]
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH


def test_global_file_entries_count_too(tmp_path, known):
    glob = tmp_path / "ssh_known_hosts"
    glob.write_text(entry("node3", K1) + "\n")
    known(entry("node3", K2))
    kh = KnownHosts([str(glob), str(known.path)])
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH
    assert kh.check(NODE3, K2).verdict is Verdict.MATCH
    assert kh.writable == str(known.path)


def test_tofu_add_then_check_matches_and_persists(tmp_path):
    path = tmp_path / "new-dir" / "known_hosts"
    kh = KnownHosts([str(path)])
    assert kh.check(NODE3, K1).verdict is Verdict.UNKNOWN
    assert kh.add(["node3", "10.0.0.3"], K1) is True
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH
    assert kh.check([["10.0.0.3"]], K1).verdict is Verdict.MATCH
    assert path.read_text() == f"node3,10.0.0.3 ssh-ed25519 {K1.get_base64()}\n"
    assert KnownHosts([str(path)]).check(NODE3, K1).verdict is Verdict.MATCH


def test_concurrent_adds_of_one_jump_host_write_one_line(tmp_path):
    path = tmp_path / "known_hosts"
    kh = KnownHosts([str(path)])
    results, barrier = [], threading.Barrier(10)

    def add():
        barrier.wait()
        results.append(kh.add(["jump", "[jump]:2222"], K1))

    threads = [threading.Thread(target=add) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 9 + [True]
    assert path.read_text().splitlines() == [f"jump,[jump]:2222 ssh-ed25519 {K1.get_base64()}"]


def test_add_writes_only_names_lacking_the_key_and_mends_a_missing_newline(known):
    known.path.write_text(entry("node3", K1))  # no trailing newline
    kh = KnownHosts([str(known.path)])
    assert kh.add(["node3"], K1) is False
    assert kh.add(["NODE3", "10.0.0.3"], K1) is True
    assert known.path.read_text().splitlines() == [entry("node3", K1), entry("10.0.0.3", K1)]


def test_add_to_unwritable_location_trusts_for_this_run_and_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    kh = KnownHosts([], writable=str(blocker / "known_hosts"))  # its directory is a file
    assert kh.add(["node3"], K1) is True
    assert kh.check(NODE3, K1).verdict is Verdict.MATCH
    assert kh.warnings[-1].startswith(f"{blocker / 'known_hosts'}: cannot append host key")
    assert kh.warnings[-1].endswith("trusted for this run only")


def test_key_types_for_follows_the_deciding_group_in_paramiko_order(known):
    r = make_key("rsa")
    kh = known(entry("node3", E1), entry("node3", K1), entry("10.0.0.3", r), entry("node5", r))
    assert kh.key_types_for(NODE3) == ["ssh-ed25519", "ecdsa-sha2-nistp256"]
    assert kh.key_types_for([["node4"], ["10.0.0.3"]]) == ["rsa-sha2-512", "rsa-sha2-256"]
    assert kh.key_types_for([["node5"]]) == ["rsa-sha2-512", "rsa-sha2-256"]
    assert kh.key_types_for([["node9"]]) == []
    assert kh.check([["node5"]], r).verdict is Verdict.MATCH


def test_name_forms():
    assert host_form("Node3") == "node3"
    assert host_form("node3", 2222) == "[node3]:2222"
    assert node_names("node3", "10.0.0.3", 2222) == [["[node3]:2222"], ["[10.0.0.3]:2222"]]
    assert node_names("node3", "NODE3") == [["node3"]]
