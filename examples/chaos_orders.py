"""Running totals per customer into files: the job ``cairn chaos`` checks in docs/chaos.md,
with three bugs it can plant (``--bug random-key``, ``--bug side-effect``,
``--bug operator-state``).

Invariant: without a bug the job is deterministic and exactly-once: order ``i`` is customer
``c<i % 8>`` paying ``i % 97 + 1``, every customer's orders come from one source subtask in
order, and the committed lines are each order's ``customer,running total``, whatever fails.

    cairn run examples/chaos_orders.py --out /tmp/totals
    cairn chaos examples/chaos_orders.py --seed=7 -- --out /tmp/totals

The bugs: ``random-key`` spreads each customer over two keys with ``random()`` (a hot key
"salted"), so a replay after a restore sends an order to another key than the first time;
``side-effect`` appends each large order to ``--alerts`` from a ``map``, outside any sink,
so a replay appends it again; ``operator-state`` keeps the totals in a dict checkpointed
as operator list state instead of keyed state: restores at the same parallelism give each
subtask its own list back, so faults alone never show it, but a restore at another
parallelism deals the list out in chunks, not by key (``cairn chaos --rescale``).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from collections.abc import Iterator
from typing import Any

from cairn.common import Types, WatermarkStrategy
from cairn.common.serialization import Encoder
from cairn.datastream import CheckpointedFunction, KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.state import ListStateDescriptor, ValueStateDescriptor

CUSTOMERS = 8


def order(i: int) -> tuple[str, int]:
    """Order ``i``: (customer, amount)."""
    return f"c{i % CUSTOMERS}", i % 97 + 1


class RunningTotal(KeyedProcessFunction[str, tuple[str, int], str]):
    """``customer,total`` after each order, the total in keyed state."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield f"{ctx.get_current_key()},{total}"


class DictTotal(KeyedProcessFunction[str, tuple[str, int], str], CheckpointedFunction):
    """BUG (--bug operator-state): per-key totals in a dict, checkpointed as operator state."""

    def initialize_state(self, context: Any) -> None:
        store = context.get_operator_state_store()
        self.saved = store.get_list_state(ListStateDescriptor("totals", Types.PICKLED_BYTE_ARRAY()))
        self.totals = dict(self.saved.get() or [])

    def snapshot_state(self, context: Any) -> None:
        self.saved.update(list(self.totals.items()))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        total = self.totals.get(value[0], 0) + value[1]
        self.totals[value[0]] = total
        yield f"{value[0]},{total}"


def salted(value: tuple[str, int]) -> str:
    """BUG (--bug random-key): a hot customer spread over two keys at random."""
    return f"{value[0]}-{random.randrange(2)}"


class Alert:
    """BUG (--bug side-effect): each large order appended to a file from a map."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, value: tuple[str, int]) -> tuple[str, int]:
        if value[1] > 90:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(f"large order: {value[0]} {value[1]}\n")
        return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "totals"))
    parser.add_argument("--orders", type=int, default=6000)
    parser.add_argument("--rate", type=int, default=3000, help="orders per second")
    parser.add_argument(
        "--bug", choices=["random-key", "side-effect", "operator-state"], default=None
    )
    parser.add_argument("--alerts", default=os.path.join(tempfile.gettempdir(), "alerts.log"))
    # Options it does not know are its next version's (chaos_orders_v2.py, --change): cairn
    # chaos --upgrade passes both versions the same arguments.
    args, _ = parser.parse_known_args()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    source = DataGeneratorSource(order, args.orders, RateLimiterStrategy.per_second(args.rate))
    orders = env.from_source(source, WatermarkStrategy.no_watermarks(), "orders").uid("orders")
    if args.bug == "side-effect":
        orders = orders.map(Alert(args.alerts)).uid("alert")
    key = salted if args.bug == "random-key" else (lambda value: value[0])
    running = DictTotal() if args.bug == "operator-state" else RunningTotal()
    totals = orders.key_by(key).process(running).uid("totals")
    sink = FileSink.for_row_format(args.out, Encoder.simple_string_encoder()).build()
    totals.sink_to(sink).uid("totals-file")
    env.execute("chaos-orders")


if __name__ == "__main__":
    main()
