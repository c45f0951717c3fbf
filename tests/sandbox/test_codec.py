"""The judge/candidate codec: exact round trips, refusals, caps, hostile bytes, and pipe frames."""

from __future__ import annotations

import ast
import importlib.util
import math
import os
import struct
import sys
import threading
import time
import tracemalloc
from collections import namedtuple
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# Loaded by file path under a name of its own, as a sandbox process loads it: nothing from heldout.
PATH = Path(__file__).resolve().parents[2] / "heldout" / "sandbox" / "codec.py"
_spec = importlib.util.spec_from_file_location("some_sandbox_codec", PATH)
codec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(codec)
CodecError, FrameTimeout, ChannelClosed = codec.CodecError, codec.FrameTimeout, codec.ChannelClosed
encode, decode = codec.encode, codec.decode


def bits(x: float) -> bytes:
    return struct.pack(">d", x)


def same(a: object, b: object) -> bool:
    """Equal with exact types all the way down, floats bit for bit, dict order included."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return bits(a) == bits(b)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True))
    if type(a) in (set, frozenset):
        index = {y: y for y in b}
        return len(a) == len(b) and all(x in index and same(x, index[x]) for x in a)
    return a == b


def round_trip(value: object) -> object:
    return decode(encode(value))


def test_same_can_tell_values_apart():
    assert same({1: (2.0, [b"x"])}, {1: (2.0, [b"x"])})
    for a, b in [(1, True), (1, 1.0), ((1,), [1]), (0.0, -0.0), ({1: 2, 3: 4}, {3: 4, 1: 2}),
                 ({(1,)}, {(True,)}), (frozenset({1}), {1}), ([1, [2]], [1, [2.0]])]:
        assert not same(a, b)


def test_the_module_imports_only_the_standard_library():
    tree = ast.parse(PATH.read_text(encoding="utf-8"))
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom)}
    assert roots <= set(sys.stdlib_module_names)
    assert roots.isdisjoint({"ctypes", "subprocess", "pickle", "marshal", "heldout"})
    assert len(PATH.read_text(encoding="utf-8").splitlines()) < 250


# --- round trips -------------------------------------------------------------------------------

EXAMPLES = [
    None, True, False, 0, 1, -1, 127, 128, -128, -129, 2**64, -(2**64), 3**500, -(7**1000),
    0.0, 1.0, -2.5, "", "héllo wörld ✓ 🐍", "\ud800 lone surrogate", "\x00", b"", b"\x00\xff",
    [], (), {}, set(), frozenset(), [1, 2], (1, 2), (1,), [[], [[]]], ((),),
    {"b": 1, "a": 2}, {1: "int", 2.5: "float", None: 0, False: "bool", b"k": 1, "s": [1]},
    {(1, "a"): [1], frozenset({1, 2}): {"x": (None,)}, (): ()},
    {frozenset({1, 2}), frozenset(), frozenset({frozenset({3})}), (1, (2, 3))},
    frozenset({1, "a", b"b", (1.5, None), frozenset({False})}),
    [1, 1.0, True, "1", b"1", (1,), [1], {1}, {1: 1}, frozenset({1})],
]


@pytest.mark.parametrize("value", EXAMPLES, ids=repr)
def test_each_type_round_trips_exactly(value):
    assert same(round_trip(value), value)


def test_shared_but_acyclic_references_round_trip():
    shared = [1, (2,)]
    expected = [[1, (2,)], [1, (2,)], {"again": [1, (2,)]}]
    assert same(round_trip([shared, shared, {"again": shared}]), expected)


FLOAT_BITS = [0x0000000000000000, 0x8000000000000000, 0x7FF8000000000000, 0xFFF8000000000000,
              0x7FF0000000000000, 0xFFF0000000000000, 0x0000000000000001, 0x7FEFFFFFFFFFFFFF,
              0x7FF0000000000001, 0x7FF8DEADBEEF0001, 0x3FF0000000000000]


@pytest.mark.parametrize("pattern", FLOAT_BITS, ids=hex)
def test_floats_are_bit_exact(pattern):
    value = struct.unpack(">d", pattern.to_bytes(8, "big"))[0]
    back = round_trip(value)
    assert type(back) is float and bits(back) == pattern.to_bytes(8, "big")


def test_negative_zero_nan_and_infinities_survive():
    zero, nan, inf = round_trip([-0.0, math.nan, -math.inf])
    assert math.copysign(1, zero) == -1 and math.isnan(nan) and inf == -math.inf


def test_types_are_not_conflated():
    back = round_trip([True, 1, 1.0, (1,), [1], {(1, 2): True}])
    assert [type(x) for x in back] == [bool, int, float, tuple, list, dict]
    assert type(next(iter(back[5]))) is tuple and back[5][(1, 2)] is True


scalars = (st.none() | st.booleans() | st.integers() | st.integers(-(2**300), 2**300)
           | st.floats(allow_nan=False) | st.text() | st.binary())
hashables = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3).map(tuple)
                         | st.frozensets(inner, max_size=3), max_leaves=8)
values = st.recursive(scalars | st.floats() | hashables, lambda inner: (
    st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
    | st.dictionaries(hashables, inner, max_size=4) | st.sets(hashables, max_size=4)
    | st.frozensets(hashables, max_size=4)), max_leaves=25)


@given(values)
@settings(max_examples=300, deadline=None)
def test_any_supported_value_round_trips(value):
    assert same(round_trip(value), value)


@given(st.integers(0, 2**64 - 1))
def test_every_float_bit_pattern_round_trips(pattern):
    raw = pattern.to_bytes(8, "big")
    assert bits(round_trip(struct.unpack(">d", raw)[0])) == raw


# --- refusals ----------------------------------------------------------------------------------

class Foo:
    pass


class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class MyStr(str):
    pass


class MyInt(int):
    pass


class MyList(list):
    pass


Point = namedtuple("Point", "x y")


def generator():
    yield 1


REFUSED = [
    (Foo(), "Foo"), (AlwaysEqual(), "AlwaysEqual"), (MyStr("a"), "MyStr"), (MyInt(1), "MyInt"),
    (MyList([1]), "MyList"), (Point(1, 2), "Point"), (generator(), "generator"),
    (lambda: 1, "function"), (bytearray(b"x"), "bytearray"), (memoryview(b"x"), "memoryview"),
    (1j, "complex"), (range(3), "range"), (int, "type"), (..., "ellipsis"),
    ([1, [2, Foo()]], "Foo"), ({"key": AlwaysEqual()}, "AlwaysEqual"), ({MyStr("k"): 1}, "MyStr"),
    ({(1, MyInt(2))}, "MyInt"), (frozenset({Foo()}), "Foo"),
]


@pytest.mark.parametrize(("value", "name"), REFUSED, ids=lambda v: type(v).__name__)
def test_unsupported_types_are_refused_by_name(value, name):
    with pytest.raises(CodecError, match=f"^unsupported type {name}$"):
        encode(value)


def cycles():
    a: list = []
    a.append(a)
    d: dict = {}
    d["self"] = d
    t = ([],)
    t[0].append(t)
    return [a, d, t, [1, [2, a]]]


@pytest.mark.parametrize("value", cycles(), ids=["list", "dict", "through-tuple", "nested"])
def test_a_recursive_structure_is_a_codec_error_not_recursion(value):
    with pytest.raises(CodecError, match="recursive"):
        encode(value)


# --- caps --------------------------------------------------------------------------------------

def nested(depth: int, leaf: object = None) -> list:
    value: object = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_bytes(depth: int, tag: bytes = b"l") -> bytes:
    return (tag + struct.pack(">I", 1)) * depth + b"N"


def test_depth_cap_on_encode_and_decode():
    assert same(round_trip(nested(codec.MAX_DEPTH)), nested(codec.MAX_DEPTH))
    assert same(decode(nested_bytes(codec.MAX_DEPTH)), nested(codec.MAX_DEPTH))
    for depth in (codec.MAX_DEPTH + 1, 10_000):
        with pytest.raises(CodecError, match="nesting"):
            encode(nested(depth))
        with pytest.raises(CodecError, match="nesting"):
            decode(nested_bytes(depth))
    with pytest.raises(CodecError, match="nesting"):  # an empty container counts as a level
        encode(nested(codec.MAX_DEPTH, leaf=()))


def test_size_cap_on_encode_and_decode():
    data = encode(b"x" * 45)
    assert len(data) == 50 and decode(data, max_bytes=50) == b"x" * 45
    assert encode(b"x" * 45, max_bytes=50) == data
    with pytest.raises(CodecError, match="longer than 49"):
        encode(b"x" * 45, max_bytes=49)
    with pytest.raises(CodecError, match="longer than 49"):
        decode(data, max_bytes=49)
    with pytest.raises(CodecError, match="longer than"):
        encode(["y" * (codec.MAX_BYTES // 2)] * 3)
    with pytest.raises(CodecError, match="longer than"):
        decode(b"N" * (codec.MAX_BYTES + 1))


def test_item_cap_on_encode_and_decode():
    limit = codec.MAX_ITEMS
    assert len(round_trip([None] * (limit - 1))) == limit - 1  # the list itself is one item
    for too_many in ([None] * limit, [[None] * 1000] * 1000, {i: None for i in range(limit // 2)}):
        with pytest.raises(CodecError, match="items"):
            encode(too_many)
    with pytest.raises(CodecError, match="items"):
        decode(b"l" + struct.pack(">I", limit) + b"N" * limit)
    with pytest.raises(CodecError, match="items"):  # counted as they arrive, not only declared
        decode(b"l" + struct.pack(">I", 2) + b"l" + struct.pack(">I", limit - 2)
               + b"N" * (limit - 2) + b"N")


def int_bytes(value: int) -> bytes:
    payload = value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)
    return b"I" + struct.pack(">I", len(payload)) + payload


def test_int_digit_cap_on_encode_and_decode():
    biggest = 10**codec.MAX_INT_DIGITS - 1
    for value in (biggest, -biggest):
        assert round_trip(value) == value
    for value in (biggest + 1, -biggest - 1, 2**400_000):
        with pytest.raises(CodecError, match="digits"):
            encode(value)
        with pytest.raises(CodecError, match="digits"):
            decode(int_bytes(value))


def colliding_ints(count: int) -> list[int]:
    return [k * (2**61 - 1) for k in range(1, count + 1)]  # every one hashes to 0


def test_many_equal_hashes_are_refused_both_ways_and_fast():
    assert {hash(k) for k in colliding_ints(100)} == {0}
    assert same(round_trip(set(colliding_ints(codec.MAX_SAME_HASH))),
                set(colliding_ints(codec.MAX_SAME_HASH)))
    with pytest.raises(CodecError, match="hash"):
        encode(dict.fromkeys(colliding_ints(codec.MAX_SAME_HASH + 1)))
    # Unchecked, these 50,000 take a set about 20 seconds to build; refused, well under one.
    hostile = b"".join(int_bytes(k) for k in colliding_ints(50_000))
    start = time.monotonic()
    with pytest.raises(CodecError, match="hash"):
        decode(b"s" + struct.pack(">I", 50_000) + hostile)
    assert time.monotonic() - start < 10  # generous, for a loaded machine; unchecked: ~20 s


# --- hostile bytes -----------------------------------------------------------------------------

def sample() -> bytes:
    return encode([None, True, -5, 2**100, 1.5, "é✓", b"\x00", (1, [2]), {3}, frozenset({4}),
                   {"k": {(1, 2): [3.0]}}, [], {}])


def test_every_truncation_and_any_trailing_byte_is_refused():
    data = sample()
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            decode(data[:cut])
    with pytest.raises(CodecError, match="after the value"):
        decode(data + b"N")


LEN = struct.pack


@pytest.mark.parametrize("data", [
    b"", b"X", b"\x00", b"l", b"l\x00\x00", b"R\x00\x00\x00", b"S\x00\x00\x00\x01\xff",
    b"s" + LEN(">I", 1) + b"l" + LEN(">I", 0), b"d" + LEN(">I", 1) + b"l" + LEN(">I", 0) + b"N",
    b"f" + LEN(">I", 1) + b"d" + LEN(">I", 0), b"s" + LEN(">I", 1) + b"t" + LEN(">I", 1) + b"s"
    + LEN(">I", 0), b"s" + LEN(">I", 2) + int_bytes(1) + b"R" + bits(1.0),
    b"d" + LEN(">I", 2) + b"TNTN", b"s" + LEN(">I", 2) + b"T" + int_bytes(1),
], ids=repr)
def test_malformed_bytes_are_codec_errors(data):
    with pytest.raises(CodecError):
        decode(data)


@pytest.mark.parametrize("tag", list(b"ISBltsfd"), ids=chr)
@pytest.mark.parametrize("declared", [2**31, 2**32 - 1])
def test_huge_declared_lengths_cost_nothing(tag, declared):
    data = bytes([tag]) + struct.pack(">I", declared) + b"N" * 100_000  # refused before building
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(CodecError, match="beyond the input"):
            decode(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 and time.monotonic() - start < 5


@pytest.mark.parametrize("tag", [b"l", b"t", b"f", b"s"])
def test_ten_thousand_levels_of_nesting_are_refused(tag):
    with pytest.raises(CodecError, match="nesting"):
        decode(nested_bytes(10_000, tag))


@pytest.mark.parametrize("data", ["N", bytearray(b"N"), memoryview(b"N"), None, 7])
def test_decode_refuses_what_is_not_bytes(data):
    with pytest.raises(CodecError, match=f"cannot decode {type(data).__name__}"):
        decode(data)


def decode_or_refuse(data: bytes) -> str:
    """"refused" (a CodecError, the only exception allowed to escape), or "round trip" when
    what decoded encodes again to the same value, exact types and float bits included."""
    try:
        value = decode(data)
    except CodecError:
        return "refused"
    again = round_trip(value)
    return "round trip" if same(again, value) else f"changed: {value!r} -> {again!r}"


@given(st.binary(max_size=300))
@settings(max_examples=500)
def test_random_bytes_never_raise_anything_else(data):
    assert decode_or_refuse(data) in ("refused", "round trip")


@given(values, st.data())
@settings(max_examples=300, deadline=None)
def test_corrupted_encodings_never_raise_anything_else(value, data):
    raw = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    assert decode_or_refuse(bytes(raw)) in ("refused", "round trip")


def test_a_megabyte_of_random_bytes_is_refused_fast():
    junk = [os.urandom(1 << 20) for _ in range(5)]
    junk.append(b"l" + struct.pack(">I", 10**6) + b"N" * 2**20)
    start = time.monotonic()
    outcomes = [decode_or_refuse(data) for data in junk]
    assert set(outcomes) <= {"refused", "round trip"}
    # A guard against a quadratic or unbounded decode, not a benchmark: the bound is generous.
    assert time.monotonic() - start < 30


# --- frames over a real pipe ------------------------------------------------------------------

@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    ends = {"r": read_end, "w": write_end}
    yield ends
    for fd in ends.values():
        os.close(fd)


def close(ends: dict, which: str) -> None:
    os.close(ends.pop(which))


def soon(seconds: float = 5) -> float:
    return time.monotonic() + seconds


def test_frames_carry_encoded_values_in_order(pipe):
    for value in ([1, (2.5, "x")], b"", {"k": {None}}):
        codec.write_frame(pipe["w"], encode(value))
    codec.write_frame(pipe["w"], b"")
    assert same(decode(codec.read_frame(pipe["r"], soon(), 1024)), [1, (2.5, "x")])
    assert decode(codec.read_frame(pipe["r"], soon(), 1024)) == b""
    assert same(decode(codec.read_frame(pipe["r"], soon(), 1024)), {"k": {None}})
    assert codec.read_frame(pipe["r"], soon(), 0) == b""


def test_partial_writes_are_resumed(pipe, monkeypatch):
    real_write, calls = os.write, []

    def three_bytes_at_a_time(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))

    monkeypatch.setattr(codec, "_os_write", three_bytes_at_a_time)
    codec.write_frame(pipe["w"], b"0123456789")
    monkeypatch.undo()
    assert len(calls) == 5 and codec.read_frame(pipe["r"], soon(), 10) == b"0123456789"


def test_a_frame_larger_than_the_pipe_buffer_crosses_a_non_blocking_fd(pipe):
    payload = os.urandom(3 << 20)
    os.set_blocking(pipe["w"], False)  # os.write then writes part, then refuses until read
    writer = threading.Thread(target=codec.write_frame, args=(pipe["w"], payload))
    writer.start()
    assert codec.read_frame(pipe["r"], soon(), len(payload)) == payload
    writer.join(5)
    assert not writer.is_alive()


def test_a_frame_dribbled_byte_by_byte_is_read_whole(pipe):
    frame = struct.pack(">I", 6) + b"abcdef"

    def dribble():
        for i in range(len(frame)):
            os.write(pipe["w"], frame[i:i + 1])
            time.sleep(0.01)

    writer = threading.Thread(target=dribble)
    writer.start()
    assert codec.read_frame(pipe["r"], soon(), 6) == b"abcdef"
    writer.join()


@pytest.mark.parametrize("sent", [b"", struct.pack(">I", 5) + b"ab"], ids=["silence", "half"])
def test_a_passed_deadline_is_a_frame_timeout(pipe, sent):
    os.write(pipe["w"], sent)
    # Should the deadline be ignored, these bytes complete a frame and the test fails, not hangs.
    rescue = threading.Timer(2, os.write, (pipe["w"], b"\0" * 8))
    rescue.start()
    start = time.monotonic()
    try:
        with pytest.raises(FrameTimeout):
            codec.read_frame(pipe["r"], start + 0.2, 1024)
    finally:
        rescue.cancel()
    assert 0.2 <= time.monotonic() - start < 1.5  # the rescue, at 2 s, would be too late
    assert issubclass(FrameTimeout, CodecError) and issubclass(ChannelClosed, CodecError)


@pytest.mark.parametrize("sent", [b"\x00\x00", struct.pack(">I", 10) + b"abc"],
                         ids=["in-header", "in-payload"])
def test_eof_mid_frame_is_a_codec_error(pipe, sent):
    os.write(pipe["w"], sent)
    close(pipe, "w")
    with pytest.raises(CodecError, match="EOF") as caught:
        codec.read_frame(pipe["r"], soon(), 1024)
    assert type(caught.value) is CodecError


def test_an_oversized_declared_length_fails_before_its_payload_is_read(pipe):
    os.write(pipe["w"], struct.pack(">I", 2**31) + b"rest")
    start = time.monotonic()
    with pytest.raises(CodecError, match="over the 1024-byte cap"):
        codec.read_frame(pipe["r"], soon(), 1024)
    assert time.monotonic() - start < 5 and os.read(pipe["r"], 100) == b"rest"


def test_clean_eof_between_frames_is_channel_closed(pipe):
    codec.write_frame(pipe["w"], b"last")
    close(pipe, "w")
    assert codec.read_frame(pipe["r"], soon(), 1024) == b"last"
    with pytest.raises(ChannelClosed):
        codec.read_frame(pipe["r"], soon(), 1024)


def test_writing_to_a_closed_reader_is_channel_closed(pipe):
    close(pipe, "r")
    with pytest.raises(ChannelClosed):
        codec.write_frame(pipe["w"], b"anyone?")


def test_frames_survive_code_in_the_process_rebinding_os_and_time(pipe):
    """The candidate's code shares a process with the codec; rebinding os.read must not cut the
    channel that carries its answers."""
    def rebound(*args):
        raise AssertionError("the codec called a rebound function")

    deadline = soon()
    with pytest.MonkeyPatch.context() as patch:
        for module, name in [(os, "read"), (os, "write"), (time, "monotonic")]:
            patch.setattr(module, name, rebound)
        codec.write_frame(pipe["w"], b"still here")
        payload = codec.read_frame(pipe["r"], deadline, 100)
    assert payload == b"still here"
