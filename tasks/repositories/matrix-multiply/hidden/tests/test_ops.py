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


class TestRectangularMultiply:
    def test_2x3_times_3x2(self):
        a = Matrix([[1, 2, 3], [4, 5, 6]])
        b = Matrix([[7, 8], [9, 10], [11, 12]])
        assert multiply(a, b) == Matrix([[58, 64], [139, 154]])

    def test_3x2_times_2x3(self):
        a = Matrix([[1, 2], [3, 4], [5, 6]])
        b = Matrix([[1, 0, 2], [0, 1, 3]])
        assert multiply(a, b) == Matrix([[1, 2, 8], [3, 4, 18], [5, 6, 28]])

    def test_row_times_column(self):
        row = Matrix([[1, 2, 3]])
        column = Matrix([[4], [5], [6]])
        assert multiply(row, column) == Matrix([[32]])
        assert multiply(column, row).shape == (3, 3)
        assert multiply(column, row)[2, 0] == 6

    def test_result_shape(self):
        assert multiply(Matrix.zeros(2, 4), Matrix.zeros(4, 3)).shape == (2, 3)

    @pytest.mark.parametrize(
        "left_shape, right_shape",
        [((2, 2), (3, 2)), ((2, 3), (2, 3)), ((1, 3), (1, 3)), ((3, 1), (3, 1))],
    )
    def test_incompatible_shapes_raise(self, left_shape, right_shape):
        with pytest.raises(ShapeError):
            multiply(Matrix.zeros(*left_shape), Matrix.zeros(*right_shape))

    def test_transpose_of_product(self):
        a = Matrix([[1, 2, 3], [0, -1, 4]])
        b = Matrix([[2, 1], [1, 0], [-3, 5]])
        assert transpose(multiply(a, b)) == multiply(transpose(b), transpose(a))
