"""Operation names ↔ Firestore document ids: reversible, and always a legal id."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from shared.ledger import opnames

# Firestore's rules for a document id.
_RESERVED = re.compile(r"__.*__", re.DOTALL)


def assert_legal_id(doc_id: str) -> None:
    assert doc_id
    assert "/" not in doc_id
    assert doc_id not in {".", ".."}
    assert not _RESERVED.fullmatch(doc_id)
    assert len(doc_id.encode("utf-8")) <= opnames.MAX_ID_BYTES


names = st.text(min_size=1, max_size=300)
path_like = st.lists(
    st.text(alphabet=st.sampled_from("ab_./%-~é__"), min_size=0, max_size=6), min_size=1
).map("/".join)


@given(st.one_of(names, path_like))
@example("batches/abc")
@example("models/x/operations/y")
@example(".")
@example("..")
@example("__")
@example("__x__")
@example("_")
@example("%2F")
@example("/leading")
@example(".hidden/x")
def test_encode_round_trips_and_gives_a_legal_id(name):
    if not name:
        return
    doc_id = opnames.encode(name)
    assert_legal_id(doc_id)
    assert opnames.decode(doc_id) == name


@given(st.one_of(names, path_like), st.one_of(names, path_like))
def test_distinct_names_get_distinct_ids(first, second):
    if first and second and first != second:
        assert opnames.encode(first) != opnames.encode(second)


@pytest.mark.parametrize(
    ("name", "doc_id"),
    [
        ("batches/abc", "batches%2Fabc"),
        ("models/x/operations/y", "models%2Fx%2Foperations%2Fy"),
        ("100%", "100%25"),
        (".", "%2E"),
        ("..", "%2E."),
        ("__meta__", "%5F_meta__"),
        ("a__b__", "a__b__"),
    ],
    ids=lambda value: value,
)
def test_known_encodings(name, doc_id):
    assert opnames.encode(name) == doc_id


@pytest.mark.parametrize(
    "doc_id",
    ["", "a%2", "a%zz", "a%2f", "x%2E", "%5F"],
    ids=["empty", "truncated escape", "not hex", "lowercase hex", "needless escape", "lone _"],
)
def test_decode_rejects_ids_encode_never_makes(doc_id):
    with pytest.raises(ValueError):
        opnames.decode(doc_id)


def test_encode_rejects_empty_and_oversized_names():
    with pytest.raises(ValueError, match="non-empty"):
        opnames.encode("")
    with pytest.raises(ValueError, match="1500"):
        opnames.encode("a/" * 600)  # 2,400 bytes once each "/" becomes "%2F"


def test_a_name_at_the_limit_is_accepted():
    assert len(opnames.encode("é" * 750).encode()) == 1500


def test_short_id_is_the_last_segment():
    assert opnames.short_id("batches/abc") == "abc"
    assert opnames.short_id("models/x/operations/y") == "y"
    assert opnames.short_id("abc") == "abc"
