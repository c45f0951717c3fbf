"""Determinants by Laplace expansion (fine for the small sizes used here)."""

from minimatrix.matrix import Matrix, ShapeError


def minor(matrix, row, col):
    """The matrix without ``row`` and ``col``."""
    rows, cols = matrix.shape
    return Matrix(
        [[matrix[i, j] for j in range(cols) if j != col] for i in range(rows) if i != row]
    )


def determinant(matrix):
    rows, cols = matrix.shape
    if rows != cols:
        raise ShapeError(f"determinant needs a square matrix, got {matrix.shape}")
    if rows == 1:
        return matrix[0, 0]
    if rows == 2:
        return matrix[0, 0] * matrix[1, 1] - matrix[0, 1] * matrix[1, 0]
    total = 0
    for col in range(cols):
        sign = -1 if col % 2 else 1
        total += sign * matrix[0, col] * determinant(minor(matrix, 0, col))
    return total
