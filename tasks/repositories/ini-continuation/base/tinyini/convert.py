"""Typed getters for parsed data."""

_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}
_MISSING = object()


def _raw(data, section, key, default):
    value = data.get(section, {}).get(key.lower(), _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise KeyError(f"{section}.{key}")
        return default
    return value


def get_int(data, section, key, default=_MISSING):
    value = _raw(data, section, key, default)
    return int(value) if isinstance(value, str) else value


def get_bool(data, section, key, default=_MISSING):
    value = _raw(data, section, key, default)
    if not isinstance(value, str):
        return value
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{section}.{key}: not a boolean: {value!r}")


def get_list(data, section, key, default=_MISSING, separator=","):
    value = _raw(data, section, key, default)
    if not isinstance(value, str):
        return value
    return [item.strip() for item in value.split(separator) if item.strip()]
