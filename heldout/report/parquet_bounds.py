"""A Parquet file read within a bound on what it unpacks to. Two ways a small file holds
gigabytes: pages that compress one repeated value (their unpacked size is in the footer, so it
is checked before any page is read), and a dictionary of one long string that every row points
to (small on disk and in the footer; decoded, one copy a row), so string columns are read as
their dictionaries and their decoded size counted before any is decoded."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


class UnpacksTooLarge(ValueError):
    """The file's columns unpack to `size` bytes, more than the bound."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


def read_parquet_bounded(path: Path, leave_out: tuple[str, ...], most: int) -> pd.DataFrame:
    """The file's columns but `leave_out` (never unpacked), as pandas reads them, or
    UnpacksTooLarge if they unpack to more than `most` bytes."""
    schema = pq.read_schema(path)
    columns = [name for name in schema.names
               if name not in leave_out and not name.startswith("__index_level_")]
    check(footer_size(pq.read_metadata(path), set(columns)), most)
    strings = [field.name for field in schema if field.name in columns and (
        pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
        or pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type))]
    table = pq.read_table(path, columns=columns, read_dictionary=strings)
    check(sum(decoded_size(column) for column in table.columns), most)
    decoded = pa.Table.from_arrays([decode(column) for column in table.columns],
                                   names=table.column_names, metadata=table.schema.metadata)
    return decoded.to_pandas()


def check(size: int, most: int) -> None:
    if size > most:
        raise UnpacksTooLarge(size)


def footer_size(metadata: pq.FileMetaData, columns: set[str]) -> int:
    """What these columns' chunks say they unpack to, over every row group."""
    return sum(chunk.total_uncompressed_size
               for group in range(metadata.num_row_groups)
               for chunk in (metadata.row_group(group).column(index)
                             for index in range(metadata.num_columns))
               if chunk.path_in_schema.split(".")[0] in columns)


def decoded_size(column: pa.ChunkedArray) -> int:
    """Bytes the column holds once every dictionary is decoded, counted without decoding."""
    if not pa.types.is_dictionary(column.type):
        return column.nbytes
    return sum(int(pc.sum(pc.take(pc.binary_length(chunk.dictionary), chunk.indices)).as_py()
                   or 0) for chunk in column.chunks)


def decode(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if not pa.types.is_dictionary(column.type):
        return column
    return pa.chunked_array([chunk.dictionary_decode() for chunk in column.chunks],
                            type=column.type.value_type)
