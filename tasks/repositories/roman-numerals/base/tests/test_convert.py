import pytest

from roman import RomanError, from_roman, to_roman


def test_to_roman_basic():
    assert to_roman(1) == "I"
    assert to_roman(4) == "IV"
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(3999) == "MMMCMXCIX"


def test_to_roman_out_of_range():
    with pytest.raises(RomanError):
        to_roman(0)
    with pytest.raises(RomanError):
        to_roman(4000)


def test_to_roman_type_check():
    with pytest.raises(TypeError):
        to_roman(2.0)
    with pytest.raises(TypeError):
        to_roman(True)


def test_from_roman_basic():
    assert from_roman("XIV") == 14
    assert from_roman("MCMXCIV") == 1994
    assert from_roman("MMMCMXCIX") == 3999


def test_from_roman_case_and_spaces():
    assert from_roman(" mmxxiv ") == 2024


def test_round_trip():
    for number in range(1, 4000):
        assert from_roman(to_roman(number)) == number
