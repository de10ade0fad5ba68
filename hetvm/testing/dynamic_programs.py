"""Small TVMScript programs with a symbolic length ``n``, shared by the pool's
tests and its benchmark so both measure the same programs."""

from __future__ import annotations

#: ``exp -> tanh`` on ``(n,)``: one intermediate, one result, both ``4 n`` bytes.
ELEMENTWISE_BY_LENGTH = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        with R.dataflow():
            a = R.exp(x)
            b = R.tanh(a)
            R.output(b)
        return b
"""

#: a small sequence block on ``(n, 16)``: matmul, softmax, residual add.
SEQUENCE_BLOCK = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 16), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            h = R.matmul(x, w)
            s = R.nn.softmax(h, axis=-1)
            y = R.add(s, x)
            R.output(y)
        return y
"""
