"""The state-size workload's 1 %-updated variant: which keys its generator touches."""

from __future__ import annotations

import pickle

import pytest
from bench.cairn_functions import HotKeysGenerator


def test_the_fill_touches_every_key_once_then_only_the_hot_fraction() -> None:
    gen = HotKeysGenerator(1000, 0.01)
    fill = gen.generate_batch(range(1000))
    assert len({k for k, _ in fill}) == 1000
    after = pickle.loads(pickle.dumps(gen)).generate_batch(range(1000, 5000))
    assert {k for k, _ in after} == {k for k, _ in fill[:10]}


def test_batches_agree_with_single_records() -> None:
    gen = HotKeysGenerator(50, 0.1)
    assert gen.generate_batch(range(40, 70)) == [gen(i) for i in range(40, 70)]


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5])
def test_a_fraction_outside_zero_to_one_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="hot_fraction"):
        HotKeysGenerator(10, fraction)
