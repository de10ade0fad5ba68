"""The corpus of exported models (tests/frontend/exported/, made by
tools/export_models.py): where it is, its manifest, and the inputs of one of
its settings. Shared by the corpus tests and benchmarks/onnx_models.py, so both
run each model on the same inputs."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

__all__ = ["CORPUS_DIR", "load_manifest", "draw_inputs"]

CORPUS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "tests", "frontend", "exported")  # fmt: skip


def load_manifest(corpus_dir: str = CORPUS_DIR) -> dict[str, dict[str, Any]]:
    """file name -> its manifest entry (model, exporter, dynamic dims, settings, inputs)."""
    with open(os.path.join(corpus_dir, "manifest.json")) as f:
        return {e["file"]: e for e in json.load(f)["models"]}


def draw_inputs(entry: dict[str, Any], setting: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Inputs for one setting: ids below their table's size, 0/1 masks with the
    first row's first position padded, floats from a normal distribution."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in entry["inputs"]:
        shape = tuple(setting[d] if isinstance(d, str) else d for d in inp["dims"])
        if inp["kind"] == "ids":
            value = rng.integers(0, inp["high"], size=shape)
        elif inp["kind"] == "mask":
            value = np.ones(shape)
            if shape[-1] > 1:
                value[0, 0] = 0
        else:
            value = rng.standard_normal(shape)
        feeds[inp["name"]] = value.astype(inp["dtype"])
    return feeds
