"""Full justification: pad lines with spaces to exactly ``width``."""

from wraptext.wrap import wrap


def justify_line(line, width):
    """Widen the gaps of ``line`` so it is ``width`` long.

    Extra spaces go to the leftmost gaps first. Lines without gaps, or
    already at least ``width`` long, are returned unchanged.
    """
    words = line.split(" ")
    gaps = len(words) - 1
    missing = width - len(line)
    if gaps == 0 or missing <= 0:
        return line
    per_gap, extra = divmod(missing, gaps)
    parts = []
    for index, word in enumerate(words[:-1]):
        parts.append(word + " " * (1 + per_gap + (1 if index < extra else 0)))
    parts.append(words[-1])
    return "".join(parts)


def justify(text, width=70):
    """Wrap ``text`` and justify every line except the last."""
    lines = wrap(text, width)
    if not lines:
        return ""
    body = [justify_line(line, width) for line in lines[:-1]]
    return "\n".join(body + [lines[-1]])
