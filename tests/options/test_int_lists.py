"""A list of ints (a tokenizer's tens of thousands of token ids) is taken whole, and a list with
anything but ints in it is still refused at its first bad element; bounds still hold."""

from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from layerzoo.errors import OptionError
from layerzoo.options import Section, option


@dataclass(frozen=True)
class Ids(Section):
    ids: tuple[int, ...] = option((), help="token ids")
    sizes: tuple[int, ...] = option((), min=1, help="bounded")


@given(st.lists(st.integers()))
def test_a_list_of_ints_is_kept_as_a_tuple(values):
    assert Ids(ids=values).ids == tuple(values)


@given(st.lists(st.integers()), st.sampled_from([True, 1.5, "3", None]), st.data())
def test_anything_else_in_it_is_refused_by_its_index(values, bad, data):
    index = data.draw(st.integers(0, len(values)))
    with pytest.raises(OptionError, match=rf"ids\.{index}"):
        Ids(ids=[*values[:index], bad, *values[index:]])


def test_bounds_hold_for_each_element():
    with pytest.raises(OptionError, match=r"sizes\.1"):
        Ids(sizes=[2, 0])
