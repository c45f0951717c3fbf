import pytest

from tinyini import ParseError, parse

SAMPLE = """
# top comment
name = demo

[server]
Host = example.org
port=8080
; another comment
empty =
"""


def test_parse_sample():
    assert parse(SAMPLE) == {
        "DEFAULT": {"name": "demo"},
        "server": {"host": "example.org", "port": "8080", "empty": ""},
    }


def test_value_may_contain_equals():
    assert parse("url = a=b")["DEFAULT"]["url"] == "a=b"


def test_repeated_section_merges():
    data = parse("[a]\nx = 1\n[b]\ny = 2\n[a]\nz = 3\n")
    assert data["a"] == {"x": "1", "z": "3"}


@pytest.mark.parametrize(
    "text, lineno",
    [("[open\n", 1), ("ok = 1\n[]\n", 2), ("a = 1\njust words\n", 2), ("= value\n", 1)],
)
def test_errors_report_line(text, lineno):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.lineno == lineno
