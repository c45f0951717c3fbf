"""A tiny dense matrix library."""

from minimatrix.determinant import determinant
from minimatrix.matrix import Matrix, ShapeError
from minimatrix.ops import add, multiply, scale, transpose

__all__ = ["Matrix", "ShapeError", "add", "determinant", "multiply", "scale", "transpose"]
