"""A rollout file is read within bounds (issue 39, item 7): its free text (completions, what
the agent was shown, the judge's messages) is never unpacked, and the rest is refused when it
would unpack past 256 MiB, whether the bulk is in compressed pages (the footer says so) or in a
dictionary of one long string every row points to (counted before it is decoded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heldout.report.inputs import ReportInputError, read_rollouts
from tests.memory import peak_growth_mib

MIB = 1 << 20


def one_string_everywhere(rows: int, length: int) -> pa.DictionaryArray:
    """`rows` values, each the same string of `length` characters: small on disk."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)),
                                          pa.array(["x" * length]))


def rollout_table(rows: int, **columns: pa.Array) -> pa.Table:
    tasks = np.arange(rows) // 4
    base = {"task_id": pa.array([f"T/{task}" for task in tasks]),
            "sample": pa.array(np.arange(rows) % 4),
            "harness": pa.array(["h1"] * rows),
            "passed": pa.array(np.arange(rows) % 3 == 0),
            "status": pa.array(["ok"] * rows)}
    return pa.table(base | columns)


def test_a_completion_column_of_2_gib_decoded_is_never_unpacked(tmp_path: Path):
    path = tmp_path / "rollouts.parquet"
    pq.write_table(rollout_table(2048, completion=one_string_everywhere(2048, MIB),
                                 trajectory=one_string_everywhere(2048, MIB)), path)
    assert path.stat().st_size < 256 * 1024
    growth, said = peak_growth_mib("rollouts", path)
    assert said == "read: 2,048"
    assert growth < 64, f"reading grew the process by {growth} MiB"
    assert "completion" not in read_rollouts(path).columns


def test_a_status_column_of_100_gib_decoded_is_refused_before_it_is_decoded(tmp_path: Path):
    path = tmp_path / "rollouts.parquet"
    rows = 100_000
    table = rollout_table(rows).set_column(4, "status", one_string_everywhere(rows, MIB))
    pq.write_table(table, path)
    growth, said = peak_growth_mib("rollouts", path)
    assert said.startswith(f"refused: {path}: its columns unpack to 104,8")
    assert said.endswith("bytes; heldout reads at most 268,435,456 (256 MiB) of a rollout file, "
                         "its completions left out")
    assert growth < 64, f"reading grew the process by {growth} MiB"


def test_compressed_pages_that_unpack_past_256_mib_are_refused_from_the_footer(tmp_path: Path):
    path = tmp_path / "rollouts.parquet"
    rows = 68
    harness = pa.array(["h" * (4 * MIB)] * rows)  # 272 MiB of one letter: zstd keeps ~30 KiB
    pq.write_table(rollout_table(rows).set_column(2, "harness", harness), path,
                   use_dictionary=False, compression="zstd")
    del harness
    assert path.stat().st_size < MIB
    with pytest.raises(ReportInputError, match=r"its columns unpack to 285,2\d\d,\d{3} bytes"):
        read_rollouts(path)


def test_a_file_within_the_bound_reads_as_pandas_reads_it(tmp_path: Path):
    """Strings are written dictionary-encoded (pyarrow's default): read as dictionaries to count
    them, they come back as the plain strings pandas reads."""
    path = tmp_path / "rollouts.parquet"
    rows = 400
    statuses = pa.array(np.where(np.arange(rows) % 2 == 0, "ok", "truncated"))
    pq.write_table(rollout_table(rows, status=statuses, completion=pa.array(["c"] * rows)), path)
    expected = pd.read_parquet(path).drop(columns=["completion"])
    pd.testing.assert_frame_equal(read_rollouts(path), expected)
    assert expected["status"].value_counts().to_dict() == {"ok": 200, "truncated": 200}
