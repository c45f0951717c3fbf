"""Cycle detection."""


class CycleError(ValueError):
    """The graph has a cycle; ``nodes`` lists the nodes that cannot be ordered."""

    def __init__(self, nodes):
        self.nodes = list(nodes)
        super().__init__("dependency cycle involving: " + ", ".join(map(str, self.nodes)))


def find_cycle(graph):
    """One cycle as a list ``[a, b, ..., a]``, or ``None`` if there is none."""
    state = {}
    path = []

    def visit(node):
        state[node] = "active"
        path.append(node)
        for successor in graph.successors(node):
            if state.get(successor) == "active":
                return path[path.index(successor):] + [successor]
            if successor not in state:
                found = visit(successor)
                if found:
                    return found
        path.pop()
        state[node] = "done"
        return None

    for node in graph.nodes:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None
