"""PyFlink's ``pyflink.datastream.connectors.rabbitmq`` (RabbitMQ): not supported by Cairn.

Invariant: every class name imported from here raises ``ImportError`` saying so (see
``connectors.missing``); the module holds nothing.
"""

from __future__ import annotations

from cairn.datastream.connectors.missing import refuse

__all__: list[str] = []


def __getattr__(name: str) -> object:
    refuse(__name__, name)
