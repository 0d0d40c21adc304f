"""The strict YAML loader's limits, read at their edges: how deep a config may nest, how long an
integer may be, and that each refusal names the line where the offending node starts."""

from __future__ import annotations

import pytest
import yaml

from trainers.strict_yaml import MAX_DEPTH, MAX_INT_DIGITS, StrictYAMLError, load_strict


def nest(k: int) -> str:
    """``k`` nested flow lists (``k`` nodes deep)."""
    return "[" * k + "]" * k


def test_a_document_may_nest_exactly_max_depth_nodes_and_not_one_more():
    assert load_strict(nest(MAX_DEPTH)) is not None
    with pytest.raises(StrictYAMLError, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_strict(nest(MAX_DEPTH + 1))


def test_a_deep_sibling_before_leaves_the_next_ones_depth_as_it_is():
    # the mapping is one level, so each value may nest MAX_DEPTH - 1 nodes
    assert load_strict(f"a: {nest(MAX_DEPTH - 1)}\nb: {nest(MAX_DEPTH - 1)}\nc: {nest(MAX_DEPTH - 1)}\n")
    for before in ("", f"a: {nest(MAX_DEPTH - 1)}\n", f"a: {nest(3)}\nz: {nest(MAX_DEPTH - 1)}\n"):
        with pytest.raises(StrictYAMLError, match="line"):
            load_strict(f"{before}b: {nest(MAX_DEPTH)}\n")


def test_the_depth_refusal_names_the_line_where_the_too_deep_node_starts():
    text = "a: 1\nb:\n" + "".join("  " * i + "- \n" for i in range(MAX_DEPTH)) + "  " * MAX_DEPTH + "- x\n"
    with pytest.raises(StrictYAMLError) as err:
        load_strict(text)
    assert str(err.value).startswith(f"line {MAX_DEPTH + 2}: nested more than {MAX_DEPTH} levels deep")


def test_an_integer_may_have_max_int_digits_and_not_one_more_and_its_line_is_named():
    assert load_strict(f"seed: {'7' * MAX_INT_DIGITS}\n") == {"seed": int("7" * MAX_INT_DIGITS)}
    with pytest.raises(StrictYAMLError) as err:
        load_strict(f"a: 1\n\nseed: {'7' * (MAX_INT_DIGITS + 1)}\n")
    assert str(err.value) == (
        f"line 3: an integer of {MAX_INT_DIGITS + 1} digits; a config's numbers have at most {MAX_INT_DIGITS}"
    )


def test_the_merge_key_refusal_says_what_to_do():
    with pytest.raises(StrictYAMLError) as err:
        load_strict("x: 1\nppo: {<<: {lr: 0.1}}\n")
    assert str(err.value) == "line 2: YAML merge keys (<<) are not accepted in a config; write the keys out"


def test_a_key_set_twice_after_an_unhashable_key_is_still_named():
    with pytest.raises(StrictYAMLError, match="key 'b' is set twice"):
        load_strict("{[1]: a, b: 1, b: 2}\n")
    with pytest.raises(yaml.YAMLError, match="unhashable"):  # alone, the base loader's own refusal
        load_strict("{[1]: a}\n")


def test_the_depth_after_a_finished_sibling_deep_inside_is_still_its_own():
    w = 10  # a list of w levels whose innermost holds a short item, then a deep one
    fits = "[" * w + "[], " + nest(MAX_DEPTH - w) + "]" * w
    assert load_strict(fits) is not None
    with pytest.raises(StrictYAMLError, match="nested more than"):
        load_strict("[" * w + "[], " + nest(MAX_DEPTH - w + 1) + "]" * w)


def test_an_alias_and_a_key_set_twice_are_named_at_their_lines():
    with pytest.raises(StrictYAMLError) as err:
        load_strict("x: &big [1, 2]\n\ny: *big\n")
    assert str(err.value) == "line 3: YAML aliases (*big) are not accepted in a config; write the value out"
    with pytest.raises(StrictYAMLError) as err:
        load_strict("a: 1\nppo:\n  lr: 0.1\n\n  lr: 0.2\n")
    assert str(err.value) == "line 5: key 'lr' is set twice in one mapping (first on line 3)"
