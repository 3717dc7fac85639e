"""Version 2 of ``examples/chaos_orders.py``: what ``cairn chaos --upgrade`` checks against
the state of version 1 (docs/chaos.md, "Upgrading a job").

Invariant: without ``--change`` it is a pure refactor of version 1 (the running-total
function renamed, the sink in a chain of its own): the same uids, the same keyed state
``total`` of Long, so it restores version 1's savepoint and commits the same lines. Each
``--change`` plants an upgrade mistake: ``uid`` gives the totals operator another uid
(``running-totals``: its state is not restored), ``state-name`` renames the keyed state
(``sum``: every customer's total starts again from zero after the upgrade),
``state-type`` declares it as a String (the savepoint's Long no longer reads).

    cairn chaos examples/chaos_orders.py --upgrade examples/chaos_orders_v2.py --seed=7
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from cairn.common import Types, WatermarkStrategy
from cairn.common.serialization import Encoder
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.state import ValueStateDescriptor

CUSTOMERS = 8


def order(i: int) -> tuple[str, int]:
    """Order ``i``: (customer, amount), as version 1."""
    return f"c{i % CUSTOMERS}", i % 97 + 1


class CustomerTotal(KeyedProcessFunction[str, tuple[str, int], str]):
    """Version 1's ``RunningTotal`` renamed; ``change`` plants an upgrade mistake."""

    def __init__(self, change: str | None) -> None:
        self.change = change

    def open(self, runtime_context: Any) -> None:
        name = "sum" if self.change == "state-name" else "total"
        kind = Types.STRING() if self.change == "state-type" else Types.LONG()
        self.total = runtime_context.get_state(ValueStateDescriptor(name, kind))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        total = int(self.total.value() or 0) + value[1]
        self.total.update(str(total) if self.change == "state-type" else total)
        yield f"{ctx.get_current_key()},{total}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "totals"))
    parser.add_argument("--orders", type=int, default=6000)
    parser.add_argument("--rate", type=int, default=3000, help="orders per second")
    parser.add_argument("--change", choices=["uid", "state-name", "state-type"], default=None)
    args, _ = parser.parse_known_args()  # version 1's options (--bug ...) too

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    source = DataGeneratorSource(order, args.orders, RateLimiterStrategy.per_second(args.rate))
    orders = env.from_source(source, WatermarkStrategy.no_watermarks(), "orders").uid("orders")
    uid = "running-totals" if args.change == "uid" else "totals"
    totals = orders.key_by(lambda value: value[0]).process(CustomerTotal(args.change)).uid(uid)
    sink = FileSink.for_row_format(args.out, Encoder.simple_string_encoder()).build()
    totals.sink_to(sink).uid("totals-file").disable_chaining()
    env.execute("chaos-orders")


if __name__ == "__main__":
    main()
