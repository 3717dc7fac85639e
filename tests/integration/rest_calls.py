"""Calls on a job's control endpoint as a client outside the job makes them: the token of the
job's registry entry (or another, or none), the status and the JSON body, errors included;
``read_url`` reads a body as it is (Prometheus text, raw JSON)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from cairn.rest.registry import JobEntry


def http(method: str, url: str, token: str | None, body: Any = None) -> tuple[int, Any]:
    """``(status, body)`` of ``method url`` with ``token`` (``None``: no header) and ``body``
    (bytes as they are, anything else as JSON)."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(entry: JobEntry, path: str, token: str | None = "") -> tuple[int, Any]:
    """``(status, body)`` of ``GET path``; ``token`` ``""``: the entry's, ``None``: no header."""
    return http("GET", entry.endpoint + path, (entry.token if token == "" else token) or None)


def read_url(url: str, token: str | None = None) -> bytes:
    """The body of ``GET url`` (``token``: as a bearer token), raising on an HTTP error."""
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=10) as response:
        body: bytes = response.read()
        return body
