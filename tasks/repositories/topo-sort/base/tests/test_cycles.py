from depgraph import Graph, find_cycle


def test_no_cycle(diamond):
    assert find_cycle(diamond) is None


def test_simple_cycle():
    graph = Graph()
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", "a")
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_self_loop():
    graph = Graph()
    graph.add_edge("x", "x")
    assert find_cycle(graph) == ["x", "x"]
