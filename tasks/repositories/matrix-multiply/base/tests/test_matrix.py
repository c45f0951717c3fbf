from fractions import Fraction

import pytest

from minimatrix import Matrix, ShapeError, determinant


def test_shape_and_access():
    m = Matrix([[1, 2, 3], [4, 5, 6]])
    assert m.shape == (2, 3)
    assert m[1, 2] == 6
    assert m.column(1) == [2, 5]


@pytest.mark.parametrize("rows", [[], [[]], [[1, 2], [3]]])
def test_bad_rows_rejected(rows):
    with pytest.raises(ShapeError):
        Matrix(rows)


def test_identity_and_zeros():
    assert Matrix.identity(2) == Matrix([[1, 0], [0, 1]])
    assert Matrix.zeros(1, 3).to_list() == [[0, 0, 0]]


def test_determinant_small():
    assert determinant(Matrix([[7]])) == 7
    assert determinant(Matrix([[1, 2], [3, 4]])) == -2


def test_determinant_3x3_fraction():
    m = Matrix([[Fraction(1, 2), 0, 1], [2, 1, 0], [0, 3, 1]])
    assert determinant(m) == Fraction(13, 2)


def test_determinant_non_square():
    with pytest.raises(ShapeError):
        determinant(Matrix([[1, 2, 3], [4, 5, 6]]))
