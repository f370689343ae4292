"""Unit conversions. hetray stores SI base units internally: seconds, bytes, bytes/s, FLOP/s.

Example:
    >>> gbit_per_s_to_bytes_per_s(10.0)
    1250000000.0
    >>> GIB
    1073741824
"""

from __future__ import annotations

TERA = 1e12
GIGA = 1e9
GIB = 1 << 30


def gbit_per_s_to_bytes_per_s(gbit_per_s: float) -> float:
    """Convert a link rate in Gbit/s (10^9 bit/s) to bytes/s."""
    return gbit_per_s * GIGA / 8.0


def bytes_per_s_to_gbit_per_s(bytes_per_s: float) -> float:
    """Convert bytes/s to a link rate in Gbit/s (inverse of :func:`gbit_per_s_to_bytes_per_s`)."""
    return bytes_per_s * 8.0 / GIGA


def gbyte_per_s_to_bytes_per_s(gbyte_per_s: float) -> float:
    """Convert a rate in GB/s (10^9 byte/s) to bytes/s."""
    return gbyte_per_s * GIGA
