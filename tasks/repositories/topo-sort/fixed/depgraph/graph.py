"""A directed graph where an edge ``a -> b`` means "a comes before b"."""


class Graph:
    def __init__(self):
        self._successors = {}

    @classmethod
    def from_dependencies(cls, mapping):
        """Build from ``{node: [nodes it depends on], ...}``."""
        graph = cls()
        for node, dependencies in mapping.items():
            graph.add_node(node)
            for dependency in dependencies:
                graph.add_edge(dependency, node)
        return graph

    def add_node(self, node):
        self._successors.setdefault(node, set())

    def add_edge(self, before, after):
        self.add_node(before)
        self.add_node(after)
        self._successors[before].add(after)

    @property
    def nodes(self):
        return sorted(self._successors)

    def successors(self, node):
        return sorted(self._successors[node])

    def in_degrees(self):
        """``{node: number of edges pointing at it}``."""
        degrees = dict.fromkeys(self._successors, 0)
        for targets in self._successors.values():
            for target in targets:
                degrees[target] += 1
        return degrees

    def __len__(self):
        return len(self._successors)
