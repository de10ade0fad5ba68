"""Source locations carried by IR nodes so errors can point at a line or a model node.

A TVMScript span is a file, line and column. A value imported from a graph (ONNX)
has no line: its span names the node instead (``node_name``, ``op_type`` and the
node's input names), so an error at import, build or run time can say which node
of the user's model it is about. Passes keep a binding's span when they rebuild it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    source_name: str
    line: int
    column: int = 0
    end_line: int | None = None
    end_column: int | None = None
    #: the graph node the value comes from (ONNX), with its op type and input names
    node_name: str | None = None
    op_type: str | None = None
    node_inputs: tuple[str, ...] = ()

    @classmethod
    def of_node(cls, source_name: str, node_name: str, op_type: str, inputs: tuple[str, ...] = ()) -> Span:
        """The span of a value made for an ONNX node (``line`` 0: a node has none)."""
        return cls(source_name, 0, node_name=node_name, op_type=op_type, node_inputs=tuple(inputs))

    def node_label(self) -> str | None:
        """``ONNX node 'Gather_3' (Gather)``, or None for a span of a text line."""
        if self.node_name is None:
            return None
        return f"ONNX node '{self.node_name}' ({self.op_type})"

    def __str__(self) -> str:
        label = self.node_label()
        if label is not None:
            return label if self.source_name in ("", "<model>") else f"{label} of {self.source_name}"
        return f"{self.source_name}:{self.line}:{self.column + 1}"
