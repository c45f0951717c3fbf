"""Nested dictionaries back to INI text."""

from tinyini.parser import DEFAULT_SECTION


def _format_pair(key, value):
    value = str(value).replace("\n", "\n    ")
    return f"{key} = {value}"


def dumps(data):
    """INI text for ``data``; ``parse(dumps(data)) == data`` for parsed data."""
    lines = []
    for key, value in data.get(DEFAULT_SECTION, {}).items():
        lines.append(_format_pair(key, value))
    for section, pairs in data.items():
        if section == DEFAULT_SECTION:
            continue
        if lines:
            lines.append("")
        lines.append(f"[{section}]")
        lines.extend(_format_pair(key, value) for key, value in pairs.items())
    return "\n".join(lines) + "\n"
