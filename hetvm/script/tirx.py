"""Alias of :mod:`hetvm.script.tir` under TVM 0.27's name (``tirx as T``)."""

from .tir import *  # noqa: F401,F403
from .tir import __getattr__  # noqa: F401
