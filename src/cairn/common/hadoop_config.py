"""Hadoop's configuration files (``core-site.xml``, ``hdfs-site.xml``) read into a dict.

Invariant: a directory's files are read in Hadoop's order (core, then hdfs: a later file's
value wins), ``<final>`` is ignored, and a property without a name or value is skipped; a
missing file is no error (a directory may hold only one of them), an unreadable or malformed
one raises ``ValueError`` naming it.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> _ = open(os.path.join(d, "core-site.xml"), "w").write(
...     "<configuration><property><name>fs.defaultFS</name>"
...     "<value>hdfs://namenode:9000</value></property></configuration>")
>>> read_hadoop_conf_dir(d)
{'fs.defaultFS': 'hdfs://namenode:9000'}
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

__all__ = ["SITE_FILES", "read_hadoop_conf_dir"]

SITE_FILES = ("core-site.xml", "hdfs-site.xml")


def read_hadoop_conf_dir(directory: str) -> dict[str, str]:
    """Every property of the site files in ``directory`` (name -> value)."""
    if not os.path.isdir(directory):
        raise ValueError(f"Hadoop configuration directory {directory!r} does not exist")
    conf: dict[str, str] = {}
    for name in SITE_FILES:
        path = os.path.join(directory, name)
        try:
            root = ET.parse(path).getroot()
        except FileNotFoundError:
            continue
        except (OSError, ET.ParseError) as exc:
            raise ValueError(f"cannot read Hadoop configuration {path}: {exc}") from None
        for prop in root.iter("property"):
            key = (prop.findtext("name") or "").strip()
            value = prop.findtext("value")
            if key and value is not None:
                conf[key] = value.strip()
    return conf
