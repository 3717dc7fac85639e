"""Options the ``cairn`` commands share: ``-D KEY=VALUE`` configuration items.

Invariant: pure: an item's text becomes one configuration entry (the first ``=`` splits key
and value, both stripped), later items win.
"""

from __future__ import annotations

__all__ = ["parse_conf_items"]


def parse_conf_items(items: list[str] | None) -> dict[str, str]:
    """``-D KEY=VALUE`` options as a dict (later ones win).

    >>> parse_conf_items(["s3.endpoint = http://127.0.0.1:8333", "a=b=c"])
    {'s3.endpoint': 'http://127.0.0.1:8333', 'a': 'b=c'}
    """
    conf: dict[str, str] = {}
    for item in items or []:
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    return conf
