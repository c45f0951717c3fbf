import pytest

from depgraph import Graph


@pytest.fixture
def diamond():
    """a -> b, a -> c, b -> d, c -> d."""
    graph = Graph()
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "d")
    graph.add_edge("c", "d")
    return graph
