"""Statistics helpers shared by the metric families: the counter-based hash behind every bootstrap and sign-flip
draw (`mix32`, `hashed_draw` and their SQL), and Student t quantiles (exact table, then a Cornish-Fisher
expansion), in Python and as SQL."""

from __future__ import annotations

import math

#: Bootstrap replicates and Monte Carlo sign-flip patterns.
BOOTSTRAP_REPLICATES = 1000
PERMUTATION_PATTERNS = 1000
#: Up to this many paired tasks the sign-flip test enumerates all 2^G patterns instead of sampling.
EXACT_PERMUTATION_MAX_TASKS = 10
#: Seeds of the hashed draws; different streams so that the bootstrap and the sign flips are unrelated.
BOOTSTRAP_SEED = 0x5EED_B007
COMPARISON_BOOTSTRAP_SEED = 0x5EED_C0DE
PERMUTATION_SEED = 0x5EED_F119
#: |T*| counts as "at least as extreme" as |T| within this tolerance: the same sum added in another order.
PERMUTATION_TOLERANCE = 1e-12
#: Student t quantiles come from an exact table up to this many degrees of freedom, then a Cornish-Fisher
#: expansion (error below 3e-8 from 30 degrees of freedom on).
T_TABLE_MAX_DF = 30
_Z_975 = 1.959963984540054

_MASK32 = 0xFFFFFFFF
_MIX_MUL_1 = 0x7FEB352D
_MIX_MUL_2 = 0x846CA68B


def mix32(value: int) -> int:
    """A 32-bit integer hash (Wellons' lowbias32), the reference for the SQL in `mix32_sql`."""
    x = value & _MASK32
    x ^= x >> 16
    x = (x * _MIX_MUL_1) & _MASK32
    x ^= x >> 15
    x = (x * _MIX_MUL_2) & _MASK32
    x ^= x >> 16
    return x


def mix32_sql(expr: str, alias: str) -> str:
    """Select-list items that end with `alias` = mix32(expr); DuckDB lets later items reuse earlier aliases."""
    u = "::ubigint"
    return (
        f"({expr}){u} & {_MASK32}{u} as {alias}_0, "
        f"xor({alias}_0, {alias}_0 >> 16) as {alias}_1, "
        f"({alias}_1 * {_MIX_MUL_1}{u}) & {_MASK32}{u} as {alias}_2, "
        f"xor({alias}_2, {alias}_2 >> 15) as {alias}_3, "
        f"({alias}_3 * {_MIX_MUL_2}{u}) & {_MASK32}{u} as {alias}_4, "
        f"xor({alias}_4, {alias}_4 >> 16) as {alias}"
    )


def hashed_draw(seed: int, replicate: int, position: int) -> int:
    """The 32-bit value behind draw `position` of replicate `replicate` (the SQL computes the same)."""
    return mix32(mix32(replicate ^ seed) ^ position)


def _t_two_sided_probability(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer df: the finite series of Abramowitz & Stegun 26.7.3-4."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for j in range(1, df // 2):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        return math.sin(theta) * total
    if df == 1:
        return 2 / math.pi * theta
    term = total = 1.0
    for j in range(1, (df - 1) // 2):
        term *= cos2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)


def student_t_975(df: int) -> float:
    """The 0.975 quantile of Student's t (the half-width factor of a 95% interval), by bisection on the CDF."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    low, high = 0.0, 1000.0
    for _ in range(100):
        middle = (low + high) / 2
        if _t_two_sided_probability(middle, df) < 0.95:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def t975_sql(df: str) -> str:
    """SQL for the 0.975 t quantile at integer `df` (NULL when df < 1)."""
    z = _Z_975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    table = " ".join(f"when {d} then {student_t_975(d)!r}" for d in range(1, T_TABLE_MAX_DF + 1))
    expansion = f"{z!r} + {g1!r} / ({df}) + {g2!r} / ({df})^2 + {g3!r} / ({df})^3 + {g4!r} / ({df})^4"
    return (
        f"(case when ({df}) < 1 then null when ({df}) <= {T_TABLE_MAX_DF} then case ({df}) {table} end "
        f"else {expansion} end)::double"
    )
