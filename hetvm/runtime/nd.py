"""``hetvm.nd``: make and inspect runtime tensors."""

from .ndarray import NDArray, ShapeTuple, array, empty

__all__ = ["NDArray", "ShapeTuple", "array", "empty"]
