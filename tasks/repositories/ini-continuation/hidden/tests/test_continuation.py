import pytest

from tinyini import ParseError, dumps, get_list, parse


class TestContinuationLines:
    def test_indented_line_continues_value(self):
        data = parse("[tool]\ncommand = run\n    --fast\n")
        assert data["tool"]["command"] == "run\n--fast"

    def test_several_continuations_and_tabs(self):
        text = "paths = /usr/bin\n  /bin\n\t/opt/bin\nnext = 1\n"
        assert parse(text)["DEFAULT"] == {"paths": "/usr/bin\n/bin\n/opt/bin", "next": "1"}

    def test_blank_lines_and_comments_inside_value(self):
        text = "[s]\nitems = a\n\n  # not part of the value\n  b\n"
        assert parse(text)["s"]["items"] == "a\nb"

    def test_continuation_of_empty_value(self):
        assert parse("[s]\nlines =\n  one\n  two\n")["s"]["lines"] == "\none\ntwo"

    def test_indented_pair_continues_too(self):
        assert parse("a = 1\n  b = 2\n")["DEFAULT"] == {"a": "1\nb = 2"}

    def test_continuation_without_key_is_an_error(self):
        with pytest.raises(ParseError) as info:
            parse("  orphan\n")
        assert info.value.lineno == 1

    def test_section_header_ends_the_value(self):
        with pytest.raises(ParseError) as info:
            parse("[a]\nk = v\n[b]\n  x = 1\n")
        assert info.value.lineno == 4

    def test_get_list_with_newline_separator(self):
        data = parse("[s]\nhosts =\n  alpha\n  beta\n")
        assert get_list(data, "s", "hosts", separator="\n") == ["alpha", "beta"]


@pytest.mark.parametrize(
    "data",
    [
        {"DEFAULT": {"motd": "hello\nworld"}},
        {"DEFAULT": {}, "s": {"cmd": "run\n--fast\n--quiet", "x": "1"}},
    ],
)
def test_dumps_round_trips_multiline_values(data):
    assert parse(dumps(data)) == data


def test_dumps_indents_continuation_lines():
    assert dumps({"DEFAULT": {"motd": "hello\nworld"}}) == "motd = hello\n    world\n"
