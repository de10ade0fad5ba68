"""Maximum flow (Dinic) and the minimum s-t cut, on integer capacities.

Nodes are ints ``0..n-1``; edges are added in program order and every loop runs
in index order, so the same graph always gives the same cut. The cut returned
is the *smallest* source side (what the source reaches in the residual graph),
so free nodes on a tie fall to the sink side -- the planner puts the default
device there.
"""

from __future__ import annotations

from collections import deque


class FlowGraph:
    """A directed graph with capacities; ``add_edge`` also adds the residual edge."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.head: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def add_node(self) -> int:
        self.head.append([])
        self.n += 1
        return self.n - 1

    def add_edge(self, u: int, v: int, cap: int, rev_cap: int = 0) -> None:
        """Edge u->v of ``cap`` (and v->u of ``rev_cap``: equal caps = undirected)."""
        self.head[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(cap)
        self.head[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(rev_cap)

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * self.n
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > 0 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[u] + 1
                    queue.append(self.to[e])
        return level if level[t] >= 0 else None

    def max_flow(self, s: int, t: int) -> int:
        """Dinic's algorithm (iterative DFS, so deep graphs need no recursion)."""
        flow = 0
        while True:
            level = self._levels(s, t)
            if level is None:
                return flow
            it = [0] * self.n
            while True:
                pushed = self._augment(s, t, level, it)
                if pushed == 0:
                    break
                flow += pushed
        return flow

    def _augment(self, s: int, t: int, level: list[int], it: list[int]) -> int:
        """One blocking-flow path from s to t along the level graph (0 if none)."""
        path: list[int] = []  # edge ids
        u = s
        while u != t:
            advanced = False
            edges = self.head[u]
            while it[u] < len(edges):
                e = edges[it[u]]
                v = self.to[e]
                if self.cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    advanced = True
                    break
                it[u] += 1
            if not advanced:
                if u == s:
                    return 0
                level[u] = -1  # dead end: prune
                e = path.pop()
                u = self.to[e ^ 1]
                it[u] += 1
        pushed = min(self.cap[e] for e in path)
        for e in path:
            self.cap[e] -= pushed
            self.cap[e ^ 1] += pushed
        return pushed

    def source_side(self, s: int) -> list[bool]:
        """Nodes reachable from ``s`` in the residual graph (after ``max_flow``)."""
        seen = [False] * self.n
        seen[s] = True
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > 0 and not seen[self.to[e]]:
                    seen[self.to[e]] = True
                    queue.append(self.to[e])
        return seen


def min_cut_hyper(
    num_nodes: int,
    source_fixed: set[int],
    sink_fixed: set[int],
    hyperedges: list[tuple[list[int], int]],
) -> tuple[list[bool], int]:
    """Splits nodes in two, minimising the weight of hyperedges with members on both sides.

    ``hyperedges`` are (members, weight); a hyperedge costs its weight once when
    it is cut (one copy serves every consumer on the other side). Returns
    ``(on_source_side, cut_weight)``. Exact: Lawler's gadget turns each
    hyperedge of three or more members into two auxiliary nodes.
    """
    inf = sum(w for _, w in hyperedges) + 1
    g = FlowGraph(num_nodes + 2)
    s, t = num_nodes, num_nodes + 1
    for u in sorted(source_fixed):
        g.add_edge(s, u, inf)
    for u in sorted(sink_fixed):
        g.add_edge(u, t, inf)
    for members, w in hyperedges:
        uniq = sorted(set(members))
        if len(uniq) < 2 or w <= 0:
            continue
        if len(uniq) == 2:
            g.add_edge(uniq[0], uniq[1], w, w)
            continue
        a, b = g.add_node(), g.add_node()
        for u in uniq:
            g.add_edge(u, a, inf)
            g.add_edge(b, u, inf)
        g.add_edge(a, b, w)
    value = g.max_flow(s, t)
    side = g.source_side(s)
    return side[:num_nodes], value
