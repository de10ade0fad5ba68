"""Writes hetvm/testing/cupy_names.json: the public callables CuPy and NumPy share,
per module, which the CuPy stand-in (hetvm/testing/cuda_host.py) lets through.

Run it in an environment with CuPy (it imports without a GPU):

    python3 -m venv /tmp/cupy-env && /tmp/cupy-env/bin/pip install cupy-cuda13x
    /tmp/cupy-env/bin/python tools/cupy_names.py
"""

from __future__ import annotations

import json
import os

import cupy
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hetvm", "testing", "cupy_names.json")


def shared(cupy_module: object, numpy_module: object, callables: bool) -> list[str]:
    names = set(dir(cupy_module)) & set(dir(numpy_module))
    return sorted(n for n in names if not n.startswith("_") and (not callables or callable(getattr(cupy_module, n))))


def main() -> None:
    modules = {"numpy": shared(cupy, np, callables=True)}
    for sub in ("linalg", "fft", "random", "lib"):
        modules[f"numpy.{sub}"] = shared(getattr(cupy, sub), getattr(np, sub), callables=False)
    modules["numpy.lib.stride_tricks"] = shared(cupy.lib.stride_tricks, np.lib.stride_tricks, callables=True)
    about = (f"Public callables CuPy {cupy.__version__} and NumPy {np.__version__} share, per module "
             "(written by tools/cupy_names.py from dir() of both); hetvm.testing.cuda_host's stand-in refuses "
             "NumPy functions outside it on device arrays, as CuPy's __array_function__ does.")
    with open(OUT, "w") as f:
        json.dump({"about": about, "modules": modules}, f, indent=0)
    print(f"{OUT}: {sum(map(len, modules.values()))} names")


if __name__ == "__main__":
    main()
