import pytest

from depgraph import CycleError, Graph, levels, topological_sort


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


def cyclic_graph():
    """a -> b -> c -> b, c -> e, plus an unrelated node d."""
    graph = Graph()
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", "b")
    graph.add_edge("c", "e")
    graph.add_node("d")
    return graph


@pytest.mark.parametrize("order_function", [topological_sort, levels])
def test_cycle_raises(order_function):
    with pytest.raises(CycleError):
        order_function(cyclic_graph())


def test_cycle_error_lists_unordered_nodes():
    with pytest.raises(CycleError) as info:
        topological_sort(cyclic_graph())
    assert info.value.nodes == ["b", "c", "e"]


def test_levels_cycle_error_lists_unordered_nodes():
    with pytest.raises(CycleError) as info:
        levels(cyclic_graph())
    assert info.value.nodes == ["b", "c", "e"]


def test_self_loop_raises(diamond):
    diamond.add_edge("d", "d")
    with pytest.raises(CycleError) as info:
        topological_sort(diamond)
    assert info.value.nodes == ["d"]


def test_cycle_error_is_value_error():
    graph = Graph.from_dependencies({"x": ["y"], "y": ["x"]})
    with pytest.raises(ValueError, match="x, y"):
        topological_sort(graph)


def test_acyclic_graph_with_many_paths_does_not_raise(diamond):
    diamond.add_edge("a", "d")
    diamond.add_edge("0", "a")
    assert topological_sort(diamond) == ["0", "a", "b", "c", "d"]
    assert levels(diamond) == [["0"], ["a"], ["b", "c"], ["d"]]
