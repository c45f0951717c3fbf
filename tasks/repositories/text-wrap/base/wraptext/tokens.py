"""Splitting text into words and words into pieces."""


def split_words(text):
    """Words of ``text``; any run of whitespace separates words."""
    return text.split()


def break_long_word(word, width):
    """Cut ``word`` into pieces of ``width`` characters (the last may be shorter)."""
    if width < 1:
        raise ValueError("width must be at least 1")
    step = max(width - 1, 1)
    return [word[index:index + step] for index in range(0, len(word), step)]
