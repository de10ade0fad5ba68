"""Programs and inputs shared by the tests of every fused_elementwise code
generator (Numba on the CPU, CUDA through CuPy): each generator's kernel must
agree with the NumPy runner on the same cases."""

import numpy as np

F32, F64 = "float32", "float64"
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e30, 88.0, -104.0, 0.5, -2.5, 7.0]  # (halves: round to even)


def special(dtype=F32, n=64, seed=0):
    """Normal values times 4 with the special ones first."""
    x = (np.random.default_rng(seed).standard_normal(n) * 4).astype(dtype)
    x[: len(SPECIAL)] = SPECIAL
    return x


# one program per family; together they hold every covered float step
FLOAT_PROGRAMS = [
    [("nn.silu", F32, "x0")],
    [("sigmoid", F32, "x0"), ("erf", F32, "x0"), ("add", F32, "t0", "t1")],
    [("nn.gelu", F32, "x0"), ("nn.gelu_tanh", F32, "x0"), ("subtract", F32, "t0", "t1")],
    [("const", F32, 1 / 6), ("multiply", F32, "x0", "t0"), ("const", F32, 0.5), ("add", F32, "t1", "t2"),
     ("clip", F32, "t3", 0.0, 1.0), ("multiply", F32, "x0", "t4")],
    [("exp", F32, "x0"), ("log", F32, "x0"), ("maximum", F32, "t0", "t1"), ("tanh", F32, "t2"),
     ("sqrt", F32, "x0"), ("minimum", F32, "t3", "t4")],
    [("rsqrt", F32, "x0"), ("reciprocal", F32, "x0"), ("divide", F32, "t0", "t1"), ("sin", F32, "t2"),
     ("cos", F32, "x0"), ("floor_divide", F32, "t3", "t4")],
    [("abs", F32, "x0"), ("power", F32, "x0", "t0"), ("negative", F32, "t1"), ("sign", F32, "x0"),
     ("floor", F32, "x0"), ("ceil", F32, "x0"), ("round", F32, "x0"), ("add", F32, "t2", "t3"),
     ("add", F32, "t4", "t5"), ("add", F32, "t7", "t6"), ("add", F32, "t8", "t9")],
    [("nn.leakyrelu", F32, "x0", 0.1), ("nn.relu", F32, "x0"), ("less", "bool", "t0", "t1"),
     ("where", F32, "t2", "t0", "t1")],
]  # fmt: skip
