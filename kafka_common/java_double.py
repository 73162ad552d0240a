"""A double as Java's ``Double.toString`` writes it: how Jackson writes a parsed JSON
number back (the reader's JSON string fields) and how Spark's metrics show a mean."""

from __future__ import annotations

import decimal

__all__ = ["java_double"]

_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def java_double(x: float) -> str:
    """Plain from 10^-3 to 10^7 (``3.0``, ``12.5``), else ``1.25E7``, ``1.2E-5``; the
    shortest digits that read back as ``x``, as Java's since JDK 19; ``NaN``,
    ``Infinity``, ``-Infinity``."""
    x = float(x)
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)
    if repr(x) in _NON_FINITE:
        return _NON_FINITE[repr(x)]
    sign, digits, exponent = decimal.Decimal(repr(x)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    power = int(exponent) + len(shown) - 1  # an int: x is finite
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"
