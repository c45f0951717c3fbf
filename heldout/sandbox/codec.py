"""Plain data across the judge/candidate boundary: a byte codec and length-prefixed pipe frames.

Not pickle (loading runs code) nor json (tuples become lists, keys strings). Types match exactly,
never by isinstance: a subclass could carry a custom __eq__ into the judge's comparisons. Both
directions walk with their own stack, not recursion, and decode checks each declared length
against the bytes present, so hostile bytes cost time and memory bounded by their size and the
caps. Standard library only, as sandboxes load this file by path.

Format: a tag byte, then N T F (None/True/False): nothing; R: 8-byte IEEE double; I S B: 4-byte
length + two's-complement int/UTF-8/bytes; l t s f d (list/tuple/set/frozenset/dict): 4-byte
count + elements (a dict's: key, value, ...). Lengths and counts are big-endian.
"""

import functools
import struct
from collections.abc import Iterable
from math import ceil, log2
from os import read as _os_read  # bound at load: candidate code in this process may rebind os.read
from os import write as _os_write
from select import POLLIN, POLLOUT, poll
from time import monotonic

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 100  # containers inside containers
MAX_ITEMS = 1_000_000  # values overall: each container, key and element counts one
MAX_INT_DIGITS = 100_000
MAX_SAME_HASH = 64  # set elements or dict keys sharing one hash value

_LEN = struct.Struct(">I")
_DOUBLE = struct.Struct(">d")
_CONTAINER_TAGS = {list: b"l", tuple: b"t", set: b"s", frozenset: b"f", dict: b"d"}
_CONSTANTS = {b"N": None, b"T": True, b"F": False}
_CLOSE = object()  # on encode's work stack, the end of a container's elements
# Shorter ints than 10**MAX_INT_DIGITS are under the cap, longer over; equal lengths need the bound.
_INT_BITS = int(MAX_INT_DIGITS * log2(10)) + 1
_int_bound = functools.cache(lambda: 10**MAX_INT_DIGITS)  # on first need: it takes ~10 ms


class CodecError(Exception):
    """The value cannot cross the boundary, or the bytes are not a value that could."""


class FrameTimeout(CodecError):
    """The deadline passed before a whole frame arrived."""


class ChannelClosed(CodecError):
    """The other end closed the pipe: between frames on read, at any point on write."""


def _check_int(value: int) -> None:
    """Same cap both ways, so the judge never decodes an int the candidate could not send."""
    bits = value.bit_length()
    if bits > _INT_BITS or (bits == _INT_BITS and abs(value) >= _int_bound()):
        raise CodecError(f"int with more than {MAX_INT_DIGITS} digits")


def _check_hashes(keys: Iterable[object]) -> None:
    """Refuse unhashable keys, and many keys sharing one hash: int, float and tuple hashes are
    predictable, and a dict or set slows to quadratic time on equal hashes."""
    seen: dict[int, int] = {}
    for key in keys:
        try:
            digest = hash(key)
        except TypeError:
            raise CodecError(f"unhashable {type(key).__name__} in a set or dict key") from None
        seen[digest] = count = seen.get(digest, 0) + 1
        if count > MAX_SAME_HASH:
            raise CodecError(f"more than {MAX_SAME_HASH} keys share one hash")


def _encode_scalar(value: object, max_bytes: int) -> bytes:
    kind = type(value)
    if value is None or kind is bool:
        return b"N" if value is None else b"T" if value else b"F"
    if kind is float:
        return b"R" + _DOUBLE.pack(value)  # bit-exact: nan payloads and -0.0 included
    if kind is int:
        _check_int(value)
        tag, payload = b"I", value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)
    elif kind in (str, bytes):
        if len(value) > max_bytes:  # before encoding a huge str
            raise CodecError(f"{kind.__name__} longer than {max_bytes} bytes")
        # surrogatepass: any str crosses, lone surrogates included.
        payload = value.encode("utf-8", "surrogatepass") if kind is str else value
        tag = b"S" if kind is str else b"B"
    else:
        raise CodecError(f"unsupported type {kind.__name__}")
    return tag + _LEN.pack(len(payload)) + payload


def encode(value: object, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes for `value`; CodecError on an unsupported type, a cycle, or a cap exceeded."""
    chunks: list[bytes] = []
    pending, size, items = [value], 0, 1
    path: dict[int, None] = {}  # ids of the containers being written: one met again is a cycle
    while pending:
        item = pending.pop()
        if item is _CLOSE:
            path.popitem()  # the last one opened: dicts pop in LIFO order
            continue
        kind = type(item)
        if kind in _CONTAINER_TAGS:
            if id(item) in path:
                raise CodecError(f"recursive {kind.__name__}")
            if len(path) >= MAX_DEPTH:
                raise CodecError(f"nesting deeper than {MAX_DEPTH}")
            # Counted when queued, so a huge or self-multiplying structure fails before it is.
            items += 2 * len(item) if kind is dict else len(item)
            if items > MAX_ITEMS:
                raise CodecError(f"more than {MAX_ITEMS} items")
            if kind in (set, frozenset, dict):
                _check_hashes(item)
            children = [x for pair in item.items() for x in pair] if kind is dict else list(item)
            chunk = _CONTAINER_TAGS[kind] + _LEN.pack(len(item))
            path[id(item)] = None
            pending.extend([_CLOSE, *reversed(children)])
        else:
            chunk = _encode_scalar(item, max_bytes)
        size += len(chunk)
        if size > max_bytes:
            raise CodecError(f"encoding longer than {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _take(data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    if size > len(data) - pos:
        raise CodecError(f"{size} bytes wanted, beyond the input")
    return data[pos:pos + size], pos + size


def _decode_scalar(tag: bytes, data: bytes, pos: int) -> tuple[object, int]:
    if tag in _CONSTANTS:
        return _CONSTANTS[tag], pos
    if tag not in (b"R", b"I", b"S", b"B"):
        raise CodecError(f"unknown tag {tag!r}")
    raw, pos = _take(data, pos, 8 if tag == b"R" else 4)
    if tag == b"R":
        return _DOUBLE.unpack(raw)[0], pos
    payload, pos = _take(data, pos, _LEN.unpack(raw)[0])
    if tag == b"I":
        value = int.from_bytes(payload, "big", signed=True)
        _check_int(value)
        return value, pos
    try:
        return (payload.decode("utf-8", "surrogatepass") if tag == b"S" else payload), pos
    except UnicodeDecodeError:
        raise CodecError("invalid UTF-8 in str") from None


def _build(tag: bytes, children: list[object]) -> object:
    if tag in (b"l", b"t"):
        return children if tag == b"l" else tuple(children)
    keys = children[0::2] if tag == b"d" else children
    _check_hashes(keys)
    kind = {b"s": set, b"f": frozenset}.get(tag)
    built = kind(keys) if kind else dict(zip(keys, children[1::2], strict=True))
    if len(built) != len(keys):  # encode never writes one twice; 1, 1.0 and True would merge
        raise CodecError("duplicate set element or dict key")
    return built


def decode(data: bytes, max_bytes: int = MAX_BYTES) -> object:
    """The value `data` encodes. Any malformed, hostile or over-cap input is a CodecError."""
    if type(data) is not bytes:
        raise CodecError(f"cannot decode {type(data).__name__}")
    if len(data) > max_bytes:
        raise CodecError(f"encoding longer than {max_bytes} bytes")
    pos, items = 0, 0
    open_: list[tuple[bytes, int, list[object]]] = []  # (tag, children expected, children)
    while True:
        tag, pos = _take(data, pos, 1)
        items += 1
        if items > MAX_ITEMS:  # counted as they come, so at most one more is ever built
            raise CodecError(f"more than {MAX_ITEMS} items")
        if tag in _CONTAINER_TAGS.values():
            if len(open_) >= MAX_DEPTH:
                raise CodecError(f"nesting deeper than {MAX_DEPTH}")
            raw, pos = _take(data, pos, 4)
            count = _LEN.unpack(raw)[0]
            expected = 2 * count if tag == b"d" else count
            if expected > len(data) - pos:  # each child takes at least one byte
                raise CodecError(f"declared count {count} beyond the input")
            if expected:
                open_.append((tag, expected, []))
                continue
            value = _build(tag, [])
        else:
            value, pos = _decode_scalar(tag, data, pos)
        while open_:  # hand the finished value up through every container it completes
            tag, expected, children = open_[-1]
            children.append(value)
            if len(children) < expected:
                break
            open_.pop()
            value = _build(tag, children)
        if not open_:
            if pos != len(data):
                raise CodecError(f"{len(data) - pos} bytes after the value")
            return value


def write_frame(fd: int, payload: bytes) -> None:
    """Write a 4-byte big-endian length then `payload`, all of it: a pipe takes partial writes."""
    if len(payload) > 0xFFFFFFFF:
        raise CodecError("frame longer than 4 GiB")
    view = memoryview(_LEN.pack(len(payload)) + payload)
    poller = poll()  # poll, not select.select: no limit on the fd's number
    poller.register(fd, POLLOUT)
    while view:
        try:
            view = view[_os_write(fd, view):]
        except BlockingIOError:  # a non-blocking fd: wait until the reader makes room
            poller.poll()
        except (BrokenPipeError, ConnectionResetError):
            raise ChannelClosed("the reader closed the pipe") from None


def _read_upto(fd: int, size: int, deadline: float) -> bytes:
    """`size` bytes, or fewer at EOF; FrameTimeout once `deadline` passes."""
    poller = poll()
    poller.register(fd, POLLIN)
    buffer = bytearray()
    while len(buffer) < size:
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise FrameTimeout(f"deadline passed with {len(buffer)} of {size} bytes read")
        if poller.poll(ceil(min(remaining, 3600) * 1000)):  # poll takes a C int
            chunk = _os_read(fd, min(size - len(buffer), 1 << 20))
            if not chunk:
                break
            buffer += chunk
    return bytes(buffer)


def read_frame(fd: int, deadline: float, max_bytes: int = MAX_BYTES) -> bytes:
    """One frame's payload, read by `deadline` (a time.monotonic() value). A declared length over
    `max_bytes` fails before the payload is read, so a hostile writer cannot make us buffer it."""
    header = _read_upto(fd, 4, deadline)
    if len(header) < 4:
        raise CodecError("EOF inside a frame header") if header else ChannelClosed("writer closed")
    (length,) = _LEN.unpack(header)
    if length > max_bytes:
        raise CodecError(f"frame of {length} bytes, over the {max_bytes}-byte cap")
    payload = _read_upto(fd, length, deadline)
    if len(payload) < length:
        raise CodecError(f"EOF after {len(payload)} of {length} frame bytes")
    return payload
