"""Random edits of JSON documents and ONNX models, for tests of loaders.

A file edited *and* re-hashed passes a loader's hash check, so what stops it
is the structure validation behind it; these edits are what a fuzz test of
that validation feeds it: numbers nudged or replaced, fields dropped, values
of another type. The ONNX edits do the same to a model: attributes, input
dims, node inputs, op types, initializers, dropped nodes.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["mutate_json", "mutate_onnx"]


def mutate_json(value: Any, rng: random.Random) -> Any:
    """``value`` with one random edit somewhere inside it (in place for
    containers; the edited value is returned either way)."""
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        if rng.random() < 0.15:
            del value[key]
        else:
            value[key] = mutate_json(value[key], rng)
        return value
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        if rng.random() < 0.15:
            del value[i]
        else:
            value[i] = mutate_json(value[i], rng)
        return value
    bumped = value + 1 if isinstance(value, int) and not isinstance(value, bool) else "f64"
    return rng.choice([-1, 0, 1 << 40, 3.5, "x", None, [], {}, bumped])


def mutate_onnx(model: Any, rng: random.Random, op_types: list[str]) -> None:
    """One random edit of an ``onnx.ModelProto``, in place; ``op_types`` are
    the op types an edit may give a node."""
    from onnx import AttributeProto, TensorProto, helper

    g = model.graph
    nodes = list(g.node)
    kind = rng.choice(["attr", "dim", "input", "optype", "init", "drop", "extra_attr"])
    if kind == "attr":
        cands = [a for n in nodes for a in n.attribute]
        if not cands:
            return
        a = rng.choice(cands)
        if a.type == AttributeProto.INT:
            a.i = rng.choice([-3, -1, 0, 1, 2, 7, 1 << 33])
        elif a.type == AttributeProto.FLOAT:
            a.f = rng.choice([0.0, -1.0, float("nan"), 1e30])
        elif a.type == AttributeProto.INTS and len(a.ints):
            a.ints[rng.randrange(len(a.ints))] = rng.choice([-5, -1, 0, 3, 100])
            if rng.random() < 0.3:
                del a.ints[rng.randrange(len(a.ints))]
        elif a.type == AttributeProto.STRING:
            a.s = rng.choice([b"", b"bogus", b"NOTSET"])
    elif kind == "extra_attr" and nodes:
        name = rng.choice(["axis", "perm", "kernel_shape", "pads", "strides", "mode", "keepdims", "group"])
        rng.choice(nodes).attribute.append(helper.make_attribute(name, rng.choice([2, [1, 2], 1.5, "x"])))
    elif kind == "dim":
        infos = [v for v in list(g.input) + list(g.output) if v.type.tensor_type.shape.dim]
        if infos:
            dims = rng.choice(infos).type.tensor_type.shape.dim
            d = dims[rng.randrange(len(dims))]
            if rng.random() < 0.5:
                d.dim_value = rng.choice([0, 1, 3, 17])
            else:
                d.dim_param = "N"
    elif kind == "input" and nodes:
        n = rng.choice(nodes)
        if n.input:
            names = ["", "nowhere"] + [x.name for x in g.input] + [o for k in nodes for o in k.output]
            n.input[rng.randrange(len(n.input))] = rng.choice(names)
    elif kind == "optype" and nodes:
        rng.choice(nodes).op_type = rng.choice(op_types)
    elif kind == "init" and g.initializer:
        t = rng.choice(list(g.initializer))
        if t.dims and rng.random() < 0.5:
            t.dims[rng.randrange(len(t.dims))] += rng.choice([-1, 1])
        else:
            t.data_type = rng.choice([TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING])
    elif kind == "drop" and nodes and (len(nodes) > 1 or rng.random() < 0.3):
        del g.node[rng.randrange(len(nodes))]
