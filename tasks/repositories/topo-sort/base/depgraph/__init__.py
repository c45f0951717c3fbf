"""Dependency graphs, topological ordering and cycle detection."""

from depgraph.cycles import CycleError, find_cycle
from depgraph.graph import Graph
from depgraph.topo import levels, topological_sort

__all__ = ["CycleError", "Graph", "find_cycle", "levels", "topological_sort"]
