"""Agents: whatever turns a task into a completion. One protocol (`protocol`), many kinds,
found by name (`registry`)."""
