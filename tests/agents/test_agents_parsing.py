"""agents.parsing: the answer parser never crashes and follows the documented rules."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.parsing import FORMATS, parse_action, sanitize_text


def test_think_action_ok():
    p = parse_action("<think>mug is on the desk</think>\n<action> take mug 1\n from desk 1 </action>")
    assert (p.action, p.valid, p.reason) == ("take mug 1 from desk 1", True, "ok")


@pytest.mark.parametrize(
    "text,reason",
    [
        ("<action>look</action>", "missing <think> tag"),
        ("<think>hmm <action>look</action>", "unclosed <think> tag"),
        ("<think>hmm</think>", "missing <action> tag"),
        ("<think>hmm</think><action>go to desk 1", "unclosed <action> tag"),
        ("<think>hmm</think><action>   </action>", "empty action"),
        ("", "empty output"),
        ("   \n ", "empty output"),
    ],
)
def test_think_action_invalid(text, reason):
    p = parse_action(text)
    assert not p.valid and p.action is None and p.reason == reason


def test_unclosed_action_fallback_keeps_partial_command():
    p = parse_action("<think>x</think><action>go to   desk 1", "think_action")
    assert p.fallback == "go to desk 1"


def test_several_action_tags_take_first_after_think():
    text = "<think>maybe <action>look</action></think><action>go east</action><action>go west</action>"
    p = parse_action(text)
    assert p.valid and p.action == "go east" and "used the first" in p.reason
    q = parse_action("<action>a</action> <action>b</action>", "action")
    assert q.action == "a"


def test_case_and_spacing_of_tags():
    p = parse_action("<THINK>x</Think>< action >Open Drawer 1</ ACTION>")
    assert p.valid and p.action == "Open Drawer 1"


def test_action_format_does_not_require_think():
    assert parse_action("<action>look</action>", "action").action == "look"
    assert parse_action("look", "action").reason == "missing <action> tag"


def test_raw_format_first_nonempty_line():
    assert parse_action("\n\n  go east  \nthen west", "raw").action == "go east"


def test_too_long_action_is_invalid():
    p = parse_action("<action>" + "x" * 600 + "</action>", "action", max_action_chars=512)
    assert not p.valid and "longer than 512" in p.reason and len(p.fallback) == 512


def test_nested_action_tag_invalid():
    assert not parse_action("<action><action>x</action>", "action").valid


def test_non_utf8_bytes_and_surrogates():
    p = parse_action(b"<think>\xff\xfe</think><action>go \xc3\x28east</action>")
    assert p.valid and p.action.startswith("go ") and p.action.endswith("east")
    q = parse_action("<think>\ud800</think><action>look\x00</action>")
    assert q.valid and q.action == "look"
    q.action.encode("utf-8")


def test_huge_output_is_fast_and_bounded():
    text = "<think>" + "blah " * 400_000 + "</think><action>look</action>"  # 2 MB
    t0 = time.perf_counter()
    p = parse_action(text)
    assert time.perf_counter() - t0 < 0.5
    assert not p.valid  # the action lies beyond the scanned window
    assert len(p.fallback) <= 512


def test_unknown_format_raises():
    with pytest.raises(ValueError, match="unknown format"):
        parse_action("x", "json")


def test_sanitize_text():
    assert sanitize_text(b"a\xffb") == "a\ufffdb"
    assert sanitize_text("abc", 2) == "ab"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.binary(),
        st.lists(
            st.sampled_from(
                ["<think>", "</think>", "<action>", "</action>", "go east", "\n", " ", "<", ">", "/", "\ud800"]
            ),
            max_size=12,
        ).map("".join),
    ),
    st.sampled_from(FORMATS),
)
def test_parser_never_raises_and_output_is_clean(text, fmt):
    p = parse_action(text, fmt)
    assert p.valid == (p.action is not None)
    if p.valid:
        assert p.action and "\n" not in p.action and p.action == p.action.strip()
        assert p.fallback == p.action
    (p.action or "").encode("utf-8")
    p.fallback.encode("utf-8")
