"""Reading one ``.npy`` array with messages a person can act on.

``np.load`` on a file that is not a ``.npy`` falls through to pickle and says
"This file contains pickled (object) data ... allow_pickle", which sends a user
the wrong way (hetvm never unpickles: an input file must not run code). Here
the file is checked step by step instead: NumPy's magic string, the header,
a dtype that holds no Python objects, and the data's length, each failure a
one-line :class:`~.inputs.InputError` naming the file.
"""

from __future__ import annotations

import numpy as np

from ..errors import HetvmError

__all__ = ["NpyError", "read_npy"]

_MAGIC = b"\x93NUMPY"


class NpyError(HetvmError):
    """A file given as a ``.npy`` array is not one hetvm can load."""


def read_npy(path: str, what: str) -> np.ndarray:
    """The array in ``path``; ``what`` starts each message (``--input x=a.npy``)."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        head = f.read(len(_MAGIC))
        if head[:2] == b"PK":
            raise NpyError(f"{what}: is a .npz archive, not a .npy array; save one array with numpy.save")
        if head != _MAGIC:
            raise NpyError(f"{what}: not a .npy file (it does not start with NumPy's magic string); "
                           "save the array with numpy.save")  # fmt: skip
        f.seek(0)
        try:
            version = fmt.read_magic(f)
            reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = reader(f)
        except (ValueError, OSError, SyntaxError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise NpyError(f"{what}: damaged .npy header ({first})") from None
        if dtype.hasobject:
            raise NpyError(f"{what}: holds Python objects (dtype {dtype}); hetvm loads numeric and bool "
                           "arrays only, and never unpickles a file")  # fmt: skip
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = f.tell()
        f.seek(0, 2)
        have = f.tell() - start
    if have < expected:
        raise NpyError(f"{what}: truncated: the header says {tuple(shape)} {dtype} ({expected:,} bytes of data), "
                       f"the file holds {have:,}")  # fmt: skip
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:  # pragma: no cover - the checks above cover NumPy's refusals
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise NpyError(f"{what}: not a loadable .npy array ({first})") from None
