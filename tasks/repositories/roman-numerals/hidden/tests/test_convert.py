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


class TestCanonicalOnly:
    @pytest.mark.parametrize(
        "numeral",
        ["IIII", "VV", "IC", "VX", "XM", "IIV", "CCCC", "DD", "IL", "MMMM", "XIIII", "LXL"],
    )
    def test_rejects_non_canonical(self, numeral):
        with pytest.raises(RomanError):
            from_roman(numeral)

    @pytest.mark.parametrize("numeral", ["iiii", " ic "])
    def test_rejects_non_canonical_lowercase(self, numeral):
        with pytest.raises(RomanError):
            from_roman(numeral)

    @pytest.mark.parametrize(
        "numeral, value",
        [
            ("IV", 4),
            ("IX", 9),
            ("XL", 40),
            ("XC", 90),
            ("CD", 400),
            ("CM", 900),
            ("mmmcmxcix", 3999),
        ],
    )
    def test_accepts_subtractive_pairs(self, numeral, value):
        assert from_roman(numeral) == value

    def test_is_roman_agrees(self):
        from roman import is_roman

        assert is_roman("XCIX")
        assert not is_roman("IC")
        assert not is_roman("IIII")
