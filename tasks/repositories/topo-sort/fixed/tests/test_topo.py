from depgraph import Graph, levels, topological_sort


def test_diamond_order(diamond):
    assert topological_sort(diamond) == ["a", "b", "c", "d"]


def test_ties_broken_by_smallest_node():
    graph = Graph()
    for node in ["zeta", "alpha", "mid"]:
        graph.add_node(node)
    assert topological_sort(graph) == ["alpha", "mid", "zeta"]


def test_isolated_nodes_included(diamond):
    diamond.add_node("0")
    assert topological_sort(diamond) == ["0", "a", "b", "c", "d"]


def test_from_dependencies():
    graph = Graph.from_dependencies({"app": ["lib", "config"], "lib": ["config"]})
    assert topological_sort(graph) == ["config", "lib", "app"]


def test_levels(diamond):
    assert levels(diamond) == [["a"], ["b", "c"], ["d"]]


def test_empty_graph():
    assert topological_sort(Graph()) == []
    assert levels(Graph()) == []
