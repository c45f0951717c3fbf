"""How heldout writes a p-value and the significance level, wherever it writes one (the report,
the terminal's headline, the verdict's reasons): one function each.

An exact p-value (the exact McNemar and sign tests, a sign-flip test that counted every
pattern) is written as it is, to three significant digits: 4.5e-10. A Monte Carlo p-value,
(1 + b)/(1 + B) from B draws (Phipson & Smyth 2010, Stat Appl Genet Mol Biol 9:39), can be no
smaller than its floor, 1/(1 + B) (2/(1 + B) for a two-sided bootstrap-t, twice its smaller
tail): written bare, its 5e-05 beside an exact 4.5e-10 reads as a measurement it is not, so it
carries its resolution, and at the floor says only that p is below it.
"""

from __future__ import annotations

# Float noise in a p at its floor: (1 + 0)/(1 + B) and 2·(1/(1 + B)) may differ in the last bit.
_FLOOR_TOLERANCE = 1e-9


def p_value_text(p: float, *, draws: int | None = None, floor: float | None = None) -> str:
    """`p` as heldout writes it, with its relation: "p = 4.5e-10" for an exact p-value (draws
    None); "p = 0.0123 (Monte Carlo, 20,000 draws)" for one from `draws` random draws, and at
    its floor, the smallest value those draws can give (by default 1/(1 + draws)),
    "p < 5e-05 (Monte Carlo, 20,000 draws)"."""
    if draws is None:
        return f"p = {p:.3g}"
    least = 1 / (1 + draws) if floor is None else floor
    resolution = f"(Monte Carlo, {draws:,} draws)"
    if p <= least * (1 + _FLOOR_TOLERANCE):
        return f"p < {least:.1g} {resolution}"
    return f"p = {p:.3g} {resolution}"


def alpha_text(alpha: float) -> str:
    """The significance level as heldout writes it, "α = 0.05": to three significant digits,
    so that a level stored as 1 − 0.95 = 0.050000000000000044 never shows its float noise."""
    return f"α = {alpha:.3g}"
