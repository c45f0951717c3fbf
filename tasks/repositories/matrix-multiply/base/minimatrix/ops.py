"""Element-wise and matrix operations."""

from minimatrix.matrix import Matrix, ShapeError


def transpose(matrix):
    rows, cols = matrix.shape
    return Matrix([[matrix[i, j] for i in range(rows)] for j in range(cols)])


def add(left, right):
    if left.shape != right.shape:
        raise ShapeError(f"cannot add {left.shape} and {right.shape}")
    rows, cols = left.shape
    return Matrix([[left[i, j] + right[i, j] for j in range(cols)] for i in range(rows)])


def scale(matrix, factor):
    rows, cols = matrix.shape
    return Matrix([[matrix[i, j] * factor for j in range(cols)] for i in range(rows)])


def multiply(left, right):
    """Matrix product: an (n x m) times an (m x p) matrix gives (n x p)."""
    left_rows, left_cols = left.shape
    right_rows, right_cols = right.shape
    if left_rows != right_cols:
        raise ShapeError(f"cannot multiply {left.shape} by {right.shape}")
    result = []
    for i in range(left_rows):
        row = []
        for j in range(right_cols):
            row.append(sum(left[i, k] * right[k, j] for k in range(left_rows)))
        result.append(row)
    return Matrix(result)
