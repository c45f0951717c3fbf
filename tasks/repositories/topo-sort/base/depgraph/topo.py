"""Topological ordering (Kahn's algorithm)."""

import heapq


def topological_sort(graph):
    """All nodes, each one after every node it depends on.

    Among the nodes that are ready at the same time the smallest comes
    first, so the result is deterministic. Raises ``CycleError`` (listing
    the nodes that could not be ordered, sorted) if the graph has a cycle.
    """
    degrees = graph.in_degrees()
    ready = [node for node, degree in degrees.items() if degree == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for successor in graph.successors(node):
            degrees[successor] -= 1
            if degrees[successor] == 0:
                heapq.heappush(ready, successor)
    return order


def levels(graph):
    """Nodes grouped into stages that can run in parallel, each sorted.

    Raises ``CycleError`` like ``topological_sort``.
    """
    degrees = graph.in_degrees()
    current = sorted(node for node, degree in degrees.items() if degree == 0)
    result = []
    while current:
        result.append(current)
        following = set()
        for node in current:
            for successor in graph.successors(node):
                degrees[successor] -= 1
                if degrees[successor] == 0:
                    following.add(successor)
        current = sorted(following)
    return result
