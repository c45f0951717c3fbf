import pytest

from roman import RomanError, is_roman
from roman.validate import check_numeral


def test_check_numeral_rejects_letters():
    with pytest.raises(RomanError, match="invalid letters"):
        check_numeral("XIZ")


def test_check_numeral_empty():
    with pytest.raises(RomanError):
        check_numeral("   ")


def test_check_numeral_type():
    with pytest.raises(TypeError):
        check_numeral(12)


def test_is_roman_simple():
    assert is_roman("XLII")
    assert not is_roman("HELLO")
    assert not is_roman(42)
