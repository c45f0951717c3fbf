"""The ``Matrix`` type."""


class ShapeError(ValueError):
    """Raised when matrix shapes do not fit an operation."""


class Matrix:
    """An immutable rows x cols matrix stored as a list of rows."""

    def __init__(self, rows):
        rows = [list(row) for row in rows]
        if not rows or not rows[0]:
            raise ShapeError("a matrix needs at least one row and one column")
        width = len(rows[0])
        if any(len(row) != width for row in rows):
            raise ShapeError("all rows must have the same length")
        self._rows = rows

    @classmethod
    def identity(cls, size):
        return cls([[1 if i == j else 0 for j in range(size)] for i in range(size)])

    @classmethod
    def zeros(cls, rows, cols):
        return cls([[0] * cols for _ in range(rows)])

    @property
    def shape(self):
        """``(rows, cols)``."""
        return len(self._rows), len(self._rows[0])

    def __getitem__(self, index):
        row, col = index
        return self._rows[row][col]

    def row(self, index):
        return list(self._rows[index])

    def column(self, index):
        return [row[index] for row in self._rows]

    def to_list(self):
        return [list(row) for row in self._rows]

    def __eq__(self, other):
        if not isinstance(other, Matrix):
            return NotImplemented
        return self._rows == other._rows

    def __repr__(self):
        return f"Matrix({self._rows!r})"
