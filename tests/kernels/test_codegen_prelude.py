"""The generated modules' shared prelude (``codegen_numba.prelude_import``):
each kernel's text imports the prelude's functions from one module named by
its hash instead of carrying the prelude; a changed prelude changes every
kernel's text, a corrupt prelude file is rewritten, and a kernel loaded from a
warm cache in a fresh process computes what the cold one did."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg

pytest.importorskip("numba")

F32 = "float32"
PROGRAM = (("add", F32, "x0", "x1"), ("nn.silu", F32, "t0"), ("sigmoid", F32, "t1"), ("tanh", F32, "t2"))


@pytest.fixture
def fresh_prelude(monkeypatch, tmp_path):
    """A kernel cache of its own, the prelude not yet loaded in this process."""
    monkeypatch.setenv("HETVM_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(cg, "_PRELUDE_IMPORT", None)
    monkeypatch.setattr(cg, "_MODULES", {})
    return tmp_path


def test_a_kernel_imports_the_prelude_instead_of_carrying_it(fresh_prelude):
    src = cg.kernel_source(PROGRAM, 2, 1, [[False], [False]])
    assert "def _sigmoid32" not in src and "def _exp_neg32" not in src
    head = cg.prelude_import()
    assert src.startswith(head)
    module = head.split("from ", 1)[1].split()[0]
    assert module in sys.modules and sys.modules[module].__file__.startswith(str(fresh_prelude))
    for name in ("_sigmoid", "_sigmoid32", "_silu32", "_tanh32", "_erf64", "_gelu_tanh32"):
        assert name in head and hasattr(sys.modules[module], name)


def test_a_changed_prelude_changes_every_kernel_text(fresh_prelude, monkeypatch):
    before = cg.kernel_source(PROGRAM, 2, 1, [[False], [False]])
    monkeypatch.setattr(cg, "_PRELUDE", cg._PRELUDE + "\n# changed\n")
    monkeypatch.setattr(cg, "_PRELUDE_IMPORT", None)
    after = cg.kernel_source(PROGRAM, 2, 1, [[False], [False]])
    assert before != after
    assert after.split("from ", 1)[1].split()[0] != before.split("from ", 1)[1].split()[0]


def test_a_corrupt_prelude_file_is_rewritten_not_trusted(fresh_prelude, monkeypatch):
    cg.prelude_import()
    (path,) = [p for p in fresh_prelude.glob("k_*.py") if p.read_text() == cg._PRELUDE]
    path.write_text("raise RuntimeError('corrupt')\n")
    monkeypatch.setattr(cg, "_PRELUDE_IMPORT", None)
    monkeypatch.setattr(cg, "_MODULES", {})
    head = cg.prelude_import()
    assert path.read_text() == cg._PRELUDE
    assert hasattr(sys.modules[head.split("from ", 1)[1].split()[0]], "_silu32")


_CHILD = r"""
import json, sys
import numpy as np
from hetvm.kernels import codegen_numba as cg
program = tuple(tuple(s) for s in json.loads(sys.argv[1]))
k = cg.generated_kernel(np, program)
x = np.linspace(-30, 30, 64, dtype=np.float32)
y = np.linspace(5, -5, 64, dtype=np.float32)
out = np.empty(64, np.float32)
k.compile_for([(64,), (64,)], ["float32", "float32"], (64,), "float32")
k(x, y, out)
mod = k.plans[((64,), (64,)), (64,)][2]
print(json.dumps({"out": out.tolist(), "hits": sum(mod.serial.stats.cache_hits.values()),
                  "misses": sum(mod.serial.stats.cache_misses.values())}))
"""


@pytest.mark.slow
def test_a_warm_cache_loads_the_kernel_and_gives_the_same_result(tmp_path):
    env = {**os.environ, "HETVM_NUMBA": "1", "HETVM_KERNEL_CACHE": str(tmp_path / "k"),
           "NUMBA_CACHE_DIR": str(tmp_path / "nb")}  # fmt: skip
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(PROGRAM)], env=env,
                              capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["hits"] == 0 and cold["misses"] == 1
    assert warm["hits"] == 1 and warm["misses"] == 0
    assert warm["out"] == cold["out"]
    x = np.linspace(-30, 30, 64, dtype=np.float32)
    y = np.linspace(5, -5, 64, dtype=np.float32)
    s = (x + y).astype(np.float64)
    silu = s / (1 + np.exp(-s))
    want = np.tanh(1 / (1 + np.exp(-silu.astype(np.float32).astype(np.float64))))
    np.testing.assert_allclose(np.array(warm["out"]), want, rtol=1e-5, atol=1e-6)
