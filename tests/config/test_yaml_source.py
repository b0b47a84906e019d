"""YAML loading: hostile or broken files are ConfigErrors naming file:line, never a traceback."""

import hashlib

import pytest

from nodecheck.config.yaml_source import MAX_DEPTH, load_file, load_text
from nodecheck.core.errors import ConfigError

# nine levels of nine aliases: 387 million items if each alias were expanded
BILLION_LAUGHS = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi")
)


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_text(text, "f.yml")
    assert caught.value.file == "f.yml"
    return caught.value


@pytest.mark.parametrize(
    "text, line, fragment, hint",
    [
        ("a: 1\nb: \x00\n", 2, "character #x0000 is not allowed", "binary file"),
        ("x: &a [*a]\n", 1, "recursive alias", "encloses it"),
        ("x: &a {y: {<<: *a}}\n", 1, "recursive alias", "encloses it"),
        ("x: &a {<<: *a}\n", 1, "recursive alias", "encloses it"),
        ("[" * 2000 + "]" * 2000, 1, f"nested more than {MAX_DEPTH} levels deep", "brackets"),
        ("a:\n" + "".join("  " * i + "-\n" for i in range(1, 2000)), MAX_DEPTH + 1, "nested more than", ""),
        ("a: 2024-13-45\n", 1, "cannot read '2024-13-45' as a timestamp", "quote it"),
        ("a: !!bool maybe\n", 1, "cannot read 'maybe' as a bool", "quote it"),
        ("a: {<<: 5}\n", 1, "a merge key (<<) takes a mapping", ""),
        ("a: {b: 1,\n     b: 2}\n", 2, "duplicate key 'b' (first at line 1)", "merge"),
    ],
)
def test_hostile_yaml_is_a_config_error_with_its_line(text, line, fragment, hint):
    err = error(text)
    assert err.line == line, str(err)
    assert fragment in err.message and hint in err.hint


@pytest.mark.parametrize(
    "text, shown, kind",
    [
        ("~: 1\n", "~", "null"),
        ("yes: 1\n", "yes", "a boolean"),
        ("nodes:\n  123: {}\n", "123", "a number"),
        ("1.5: 1\n", "1.5", "a number"),
        ("2024-01-01: x\n", "2024-01-01", "a date"),
    ],
)
def test_a_key_yaml_reads_as_something_else_than_a_name_must_be_quoted(text, shown, kind):
    err = error(text)
    assert err.message == f"key {shown!r} is read by YAML as {kind}, not a name"
    assert err.line == text.count("\n") and err.hint == f'quote it: "{shown}":'


@pytest.mark.parametrize(
    "text, fragment", [("[a, b]: 1\n", "a list cannot be a key"), ("? {a: 1}\n: 2\n", "a mapping cannot be a key")]
)
def test_a_collection_is_not_a_key(text, fragment):
    err = error(text)
    assert (err.line, err.message) == (1, fragment) and "quote it" in err.hint


def test_a_quoted_number_is_a_name():
    assert load_text('nodes:\n  "123": {}\n', "f.yml").data == {"nodes": {"123": {}}}


def test_merge_keys_merge_and_own_keys_override_them():
    src = load_text(
        "base: &b {port: 22, user: root}\nnode: {<<: *b, port: 2222}\nboth: {<<: [{port: 1}, *b]}\n", "f.yml"
    )
    assert src.data["node"] == {"port": 2222, "user": "root"}
    assert src.data["both"] == {"port": 1, "user": "root"}  # in <<: [*x, *y] x's keys win
    assert src.line(("node", "port")) == 2 and src.line(("node", "user")) == 1


def test_an_alias_bomb_costs_what_it_is_written_in():
    src = load_text(BILLION_LAUGHS, "f.yml")
    assert src.data["i"][0][0][0][0][0][0][0][0] == [1] * 9
    assert src.data["i"][0] is src.data["i"][1]  # one value, shared, not 9**8 copies


def test_an_empty_document_is_none():
    assert load_text("# only a comment\n", "f.yml").data is None


@pytest.mark.parametrize(
    "content, line, fragment",
    [
        (b"nodes:\n  gpu1: {}\n\xff\xfe\n", 3, "not UTF-8 text (byte 0xff)"),
        (b"\x7fELF\x02\x01\x01\x00\x00", 1, "not allowed in YAML"),
    ],
)
def test_a_binary_or_non_utf8_file_is_a_config_error(tmp_path, content, line, fragment):
    path = tmp_path / "hosts.yml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    assert (caught.value.file, caught.value.line) == (str(path), line)
    assert fragment in caught.value.message


def test_a_directory_is_not_a_file(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_file(tmp_path)
    assert caught.value.file == str(tmp_path)
    assert caught.value.message == "is a directory, not a file"


def test_the_file_is_hashed_as_read(tmp_path):
    path = tmp_path / "a.yml"
    path.write_text("a: 1\n")
    assert load_file(path).sha256 == hashlib.sha256(b"a: 1\n").hexdigest()


# --- issue 17: every message that quotes input quotes a bounded excerpt -----------------------------


def test_shown_is_bounded_for_nested_aliases_long_strings_and_huge_numbers():
    import time

    from nodecheck.config.yaml_source import SHOWN_MAX_CHARS, shown

    value = load_text(BILLION_LAUGHS, "f.yml").data["i"]  # 9^9 strings if expanded
    started = time.process_time()  # CPU time: a busy machine's other processes do not count
    text = shown(value)
    assert time.process_time() - started < 0.5 and len(text) <= SHOWN_MAX_CHARS + 1
    assert text.startswith("[[[") and "..." in text
    assert len(shown("x" * 1_000_000)) < 100 and shown("x" * 1_000_000).startswith("'xxxx")
    assert shown(10**5000) == "<an integer of 16610 bits>"
    assert (shown(True), shown(float("nan")), shown("auto")) == ("True", "nan", "'auto'")


def test_a_scalar_that_cannot_be_read_is_quoted_bounded():
    err = error("a: !!int " + "9x" * 100_000 + "\n")
    assert len(str(err)) < 1000 and err.message.startswith("cannot read '9x9x")


def test_a_duplicate_long_key_is_quoted_bounded():
    key = "k" * 100_000
    err = error(f"? {key}\n: 1\n? {key}\n: 2\n")
    assert len(str(err)) < 1000 and err.line == 3
