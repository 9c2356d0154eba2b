import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from netsim.rng import BlockDraws, RandomStreams
from netsim.units import parse_bandwidth, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("100ms", 0.1),
        ("1.5s", 1.5),
        ("10min", 600),
        ("2h", 7200),
        ("2d", 172800),
        (3, 3.0),
        ("250us", 250e-6),
        ("0", 0.0),
        (" 7 s ", 7.0),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["-1s", "5 parsecs", "1m", "abc", True, None, float("inf")])
def test_bad_durations_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_sizes_and_bandwidth():
    assert parse_size("64B") == 64
    assert parse_size("1MB") == 1e6
    assert parse_size("1MiB") == 2**20
    assert parse_bandwidth("100kbit/s") == pytest.approx(12500.0)
    # the paper's illustration: a 1 MB walk at 100 kbit/s takes over a minute (§4.3)
    assert parse_size("1MB") / parse_bandwidth("100kbit/s") == pytest.approx(80.0)
    with pytest.raises(ValueError, match="/s"):
        parse_bandwidth("100kbit")
    with pytest.raises(ValueError, match="positive"):
        parse_bandwidth("0B/s")


@given(st.floats(min_value=0, max_value=1e7, allow_nan=False), st.sampled_from(["ms", "s", "min"]))
def test_duration_round_trip(value, unit):
    factor = {"ms": 1e-3, "s": 1.0, "min": 60.0}[unit]
    assert math.isclose(parse_duration(f"{value!r}{unit}"), value * factor, rel_tol=1e-12)


def test_streams_are_reproducible_and_independent():
    a, b = RandomStreams(123), RandomStreams(123)
    assert (
        a.get("churn").integers(0, 1000, 3).tolist() == b.get("churn").integers(0, 1000, 3).tolist()
    )
    assert RandomStreams(123).get("a").integers(0, 1000, 3).tolist() == [429, 29, 192]
    # asking for another stream first does not change a stream's draws
    c = RandomStreams(123)
    c.get("links.delay").random(1000)
    assert c.get("a").integers(0, 1000, 3).tolist() == [429, 29, 192]
    assert RandomStreams(124).get("a").integers(0, 1000, 3).tolist() != [429, 29, 192]
    assert a.get("churn") is a.get("churn")


def test_block_draws_consume_the_stream_in_order():
    rng = np.random.default_rng(5)
    draws = BlockDraws(np.random.default_rng(5).random, block=7)
    expected = rng.random(20).tolist()
    assert [draws() for _ in range(20)] == expected


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: rng.random,
        lambda rng: lambda size: rng.uniform(0.01, 0.05, size),
        lambda rng: lambda size: rng.exponential(0.03, size),
        lambda rng: lambda size: rng.lognormal(-3.0, 0.5, size),
    ],
)
def test_many_blocks_at_once_are_the_values_one_at_a_time(draw):
    """What a compiled reader takes (the rest of the block, then ever more blocks at once)
    is the sequence the object hands out one draw at a time, value for value."""
    one_at_a_time = BlockDraws(draw(np.random.default_rng(11)), block=7)
    expected = [one_at_a_time() for _ in range(7 * 32)]
    taken_over = BlockDraws(draw(np.random.default_rng(11)), block=7)
    taken = [taken_over() for _ in range(3)]
    parts = [np.array(taken), taken_over.remaining()]
    parts += [taken_over.next_blocks(count) for count in (1, 2, 4, 8, 16)]
    assert taken_over.block == 7
    assert np.concatenate(parts).tolist() == expected
