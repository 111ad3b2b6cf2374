"""The YAML reader: what yaml.SafeLoader reads is read alike; what it must not is refused."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.errors import InputError
from labq.formats.limits import Limits, native_lists
from labq.formats.source import load_json, load_yaml
from labq.formats.yamltree import read_yaml

TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT
SCALARS |= st.floats(allow_nan=False, allow_infinity=False)
DATA = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


def _load(text: str, **kw: Any) -> Any:
    return load_yaml(text, source="doc.yaml", **kw)[0]


@settings(max_examples=300, deadline=None)
@given(data=DATA, flow=st.sampled_from([None, True, False]), unicode=st.booleans())
def test_data_dumped_by_pyyaml_reads_as_safe_load_reads_it(
    data: Any, flow: bool | None, unicode: bool
) -> None:
    text = yaml.safe_dump({"d": data}, default_flow_style=flow, allow_unicode=unicode)
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:  # e.g. characters YAML does not allow: refused here too
        with pytest.raises(InputError):
            _load(text)
        return
    assert _load(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  b: 3\n",
        "a: &a {k: 1}\nb: &b {k: 2, j: 3}\nx:\n  <<: [*a, *b]\n",
        "a: &a {k: 1}\nb: &b {k: 2}\nx:\n  <<: *a\n  <<: *b\n",
        "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}, {a: 2}]\n",
        "b: !!binary aGVsbG8=\nt: 2024-01-02 03:04:05\nd: 2024-01-02\nf: !!float 1\n",
        "n: ~\ny: yes\no: 0o17\nx: 0x1f\nc: 017\ns: 1_000\ne: 1:30\nq: '1'\nm: -.5e3\n",
        "%YAML 1.1\n---\na: !!str 1\nb: !!int '2'\n",
        "? [a, b]\n: 1\n",  # unhashable key: both refuse
        "a: [*x]\n",  # undefined alias: both refuse
        "=: 1\n",
    ],
)
def test_yaml_features_read_as_safe_load_reads_them(text: str) -> None:
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:
        with pytest.raises(InputError) as caught:
            _load(text)
        assert caught.value.line is not None
        return
    assert _load(text) == expected


@pytest.mark.parametrize(
    ("text", "words", "line"),
    [
        ("a: 1\nb: !!python/object:os.system {}\n", ["python/object"], 2),
        ("a: 1\nb: !!python/name:os.system ''\n", ["python/name"], 2),
        ("a:\n  b: !custom x\n", ["!custom"], 2),
        ("a: &x\n  - *x\n", ["inside its own anchor"], 2),
        ("a: 1\na: 2\n", ["duplicate key 'a'"], 2),
        ("a: 1\n'a': 2\n", ["duplicate key 'a'"], 2),
        ("a: 1\n---\nb: 2\n", ["one document"], 2),
        ("", ["empty"], None),
        ("a: 2024-13-45\n", ["cannot read '2024-13-45' as timestamp"], 1),
        ("a: <<\n", ["merge"], 1),
    ],
)
def test_what_safe_load_must_not_read_is_refused_with_its_line(
    text: str, words: list[str], line: int | None
) -> None:
    with pytest.raises(InputError) as caught:
        _load(text)
    for word in words:
        assert word in caught.value.problem
    assert caught.value.line == line


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 12):  # 9**12 nodes once expanded
        prev, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    started = time.thread_time()
    with pytest.raises(InputError, match="through its aliases") as caught:
        _load("\n".join(lines) + "\n")
    assert caught.value.line is not None
    assert time.thread_time() - started < 1


def test_lines_are_those_of_the_places() -> None:
    text = "a:\n  b:\n    - x\n    - {c: 1,\n       d: [2]}\ne: 3\n"
    _, lines = load_yaml(text, source="doc.yaml")
    assert [lines.line_of(p) for p in [("a",), ("a", "b"), ("a", "b", 1, "d"), ("e",)]] == [
        1,
        2,
        5,
        6,
    ]
    assert lines.line_of(("a", "b", 0, "nowhere")) == 3


def test_json_lines_are_found_when_an_error_needs_them() -> None:
    _, lines = load_json('{"a":\n {"b": [1,\n 2]}}', source="doc.json")
    assert lines.line_of(("a", "b", 1)) == 3
    assert lines.line_of(("a",)) == 1
    # JSON that YAML cannot re-read is still read; its errors name the place only
    data, lines = load_json('{"a": "\\ud83d\\ude00\ue900",\n "b": 1}', source="doc.json")
    assert data == {"a": "\U0001f600\ue900", "b": 1}
    assert lines.line_of(("b",)) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('a: "\\ud83d\\ude00"', "\U0001f600"),
        ('{"a": "x\\uD83D\\uDE00y"}', "x\U0001f600y"),
        ('a: "\\\\ud83d"', "\\ud83d"),  # an escaped backslash, then text
        ("a: \\ud83d\\ude00", "\\ud83d\\ude00"),  # plain: a backslash is itself
        ("a: '\\ud83d'", "\\ud83d"),
        ('a: |\n  \\ud83d "\\ude00"\n', '\\ud83d "\\ude00"\n'),
        ('a: "\\ud83d\\\n  \\ude00"', "\U0001f600"),  # an escaped line break between halves
    ],
)
def test_surrogate_escapes_join_in_double_quotes_only(text: str, expected: str) -> None:
    assert _load(text)["a"] == expected


@pytest.mark.parametrize(
    ("text", "place", "line"),
    [
        ('a:\n  b: "x\\ud800"', "a.b", 2),
        ('a:\n  - {"\\udc00": 1}', "a[0]", 2),
        ('a:\n  "k\\u0000": 1', "a", 2),
        ('a: ["\\ude00\\ud83d"]', "a[0]", 1),  # the halves in the wrong order
    ],
)
def test_lone_surrogates_and_nul_are_refused_naming_the_place(
    text: str, place: str, line: int
) -> None:
    with pytest.raises(InputError) as caught:
        _load(text)
    assert caught.value.place == place
    assert caught.value.line == line
    assert "surrogate" in caught.value.problem or "NUL" in caught.value.problem


def test_private_use_characters_beside_surrogate_escapes_are_refused_not_misread() -> None:
    with pytest.raises(InputError, match="U\\+E800-U\\+EFFF") as caught:
        _load('a: "\\ud83d\\ude00"\nb: "\ue900"\n')
    assert caught.value.line == 2
    assert _load('b: "\ue900"\n') == {"b": "\ue900"}  # alone, it is only a character


def test_a_list_past_its_limit_is_refused_after_reading_one_item_more() -> None:
    limits = Limits(tasks_per_recipe=3)
    text = "recipe_sets:\n- recipes:\n  - tasks:\n" + "    - name: t\n" * 4 + "  - x: [\n"
    # the broken end is never read: the fourth task ends the reading
    with pytest.raises(InputError) as caught:
        _load(text, lists=native_lists(limits))
    assert caught.value.problem == (
        "4 or more tasks is more than the limit of 3 (limits.tasks_per_recipe)"
    )
    assert (caught.value.place, caught.value.line) == ("recipe_sets[0].recipes[0].tasks", 3)


def test_floats_dump_as_they_were_written_and_read_back_equal():
    text = "os_version: 8.10\nratio: 0.5\nbig: 1.0e+3\ninfinite: .inf\nplain: 2\n"
    data, _ = read_yaml(text, source="x.yaml", max_depth=20)
    assert data["os_version"] == 8.1
    assert data["big"] == 1000.0
    dumped = yaml.safe_dump(data, sort_keys=False)
    assert "os_version: 8.10\n" in dumped
    assert "ratio: 0.5\n" in dumped
    assert yaml.safe_load(dumped) == data
    assert json.loads(json.dumps(data)) == data
