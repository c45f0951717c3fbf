import pytest

from minimatrix import Matrix, ShapeError, add, multiply, scale, transpose


def test_transpose():
    assert transpose(Matrix([[1, 2, 3], [4, 5, 6]])) == Matrix([[1, 4], [2, 5], [3, 6]])


def test_add_and_scale():
    a = Matrix([[1, 2], [3, 4]])
    assert add(a, a) == scale(a, 2)


def test_add_shape_mismatch():
    with pytest.raises(ShapeError):
        add(Matrix([[1, 2]]), Matrix([[1], [2]]))


def test_multiply_square():
    a = Matrix([[1, 2], [3, 4]])
    b = Matrix([[5, 6], [7, 8]])
    assert multiply(a, b) == Matrix([[19, 22], [43, 50]])


def test_multiply_identity():
    a = Matrix([[2, -1, 0], [1, 3, 5], [0, 0, 4]])
    assert multiply(a, Matrix.identity(3)) == a
    assert multiply(Matrix.identity(3), a) == a
