"""GET on a job's control endpoint as a client outside the job sees it: the token of the
job's registry entry (or another, or none), the status and the JSON body, errors included."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from cairn.rest.registry import JobEntry


def get(entry: JobEntry, path: str, token: str | None = "") -> tuple[int, Any]:
    """``(status, body)`` of ``GET path``; ``token`` ``""``: the entry's, ``None``: no header."""
    req = urllib.request.Request(entry.endpoint + path)
    token = entry.token if token == "" else token
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
