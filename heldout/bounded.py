"""Input files read within bounds, as they stream in: a small hostile file (a `.gz` that
unpacks to gigabytes, a line of megabytes, a document of a million empty arrays) costs at most
a bounded amount of memory and ends in one sentence naming the file, never in a crash.

JSON Lines files are read a line at a time (`file_lines`); a whole JSON document (a results
file another harness wrote) is read at most MAX_DOCUMENT_BYTES, and parsed only when the values
it could hold stay under MAX_DOCUMENT_VALUES (`read_document`): parsed, `[],` over and over
takes about twenty times its size.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from heldout.errors import InputFileError, Problem
from heldout.json_lines import LineError, loads_line

# The largest JSON Lines file heldout reads (unpacked, for .gz), checked before it is read.
MAX_FILE_BYTES = 64 * 2**20
# The longest line read: parsed, 4 MiB of the worst valid JSON (`[],` over and over) takes
# about 100 MiB, and no completion is that long (a repository task's diff stops at 1 MiB).
MAX_LINE_BYTES = 4 * 2**20
# A whole JSON document: its bytes, and the values it may hold (each array, object, number or
# string costs 50 to 100 bytes parsed; 2 million is ten times a HumanEval+ results file at
# n = 200).
MAX_DOCUMENT_BYTES = 64 * 2**20
MAX_DOCUMENT_VALUES = 2_000_000
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _refusal(path: Path, message: str) -> InputFileError:
    return InputFileError(path, [Problem(None, None, message)])


def file_lines(path: Path, noun: str) -> Iterator[bytes | None]:
    """The file's lines, unpacked (.gz) and read one at a time: neither the file nor its lines
    are held whole, and reading stops at MAX_FILE_BYTES unpacked, whatever the file claims. A
    line longer than MAX_LINE_BYTES is passed over in pieces and comes out as None. `noun`
    names the file in the refusal ("a samples file")."""
    if not path.is_file():
        raise _refusal(path, "no such file")
    packed = path.name.lower().endswith(".gz")
    over = _refusal(path, f"more than {MAX_FILE_BYTES:,} bytes (64 MiB)"
                          f"{' unpacked' if packed else ''}: heldout reads {noun} of at most "
                          "that; split it")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise over  # unread
    read = 0

    def piece(stream: IO[bytes], most: int) -> bytes:
        nonlocal read
        data = stream.readline(min(most, MAX_FILE_BYTES + 1 - read))
        read += len(data)
        if read > MAX_FILE_BYTES:
            raise over
        return data

    try:
        with path.open("rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if packed else raw
            while line := piece(stream, MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while (rest := piece(stream, 1 << 20)) and not rest.endswith(b"\n"):
                        pass
                    yield None
                    continue
                yield (line.removeprefix(b"\xef\xbb\xbf") if read == len(line) else
                       line).removesuffix(b"\n")
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise _refusal(path, f"not readable: {error}") from None


def read_document(path: Path, noun: str) -> Any:
    """The JSON value of a whole file of at most MAX_DOCUMENT_BYTES holding at most
    MAX_DOCUMENT_VALUES values, or InputFileError saying which bound it passed or why it is
    not JSON (nesting and integer lengths checked as for a JSON line)."""
    if not path.is_file():
        raise _refusal(path, "no such file")
    if path.stat().st_size > MAX_DOCUMENT_BYTES:
        raise _refusal(path, f"more than {MAX_DOCUMENT_BYTES:,} bytes (64 MiB): heldout reads "
                             f"{noun} of at most that")
    with path.open("rb") as stream:
        data = stream.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _refusal(path, f"grew past {MAX_DOCUMENT_BYTES:,} bytes while read")
    structure = _STRING.sub(b'""', data)  # commas and brackets inside strings are not values
    values = sum(structure.count(mark) for mark in (b",", b"[", b"{")) + 1
    del structure
    if values > MAX_DOCUMENT_VALUES:
        raise _refusal(path, f"up to {values:,} JSON values: heldout reads {noun} of at most "
                             f"{MAX_DOCUMENT_VALUES:,}")
    try:
        return loads_line(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except UnicodeDecodeError as error:
        raise _refusal(path, f"not UTF-8: byte 0x{data[error.start]:02x} at offset "
                             f"{error.start}") from None
    except LineError as error:
        raise _refusal(path, str(error).replace(" at column ", " at character ")) from None
