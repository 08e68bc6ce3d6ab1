"""The classify app without services: input checks, the answer's label, the write-back's
fields (with fake writes), the requests' shape and adoption (with a fake gateway)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from apps.classify import COLLECTION, DEFAULT_LABELS, KIND, app, classify_tag
from apps.classify.kind import (
    LabelError,
    adopt,
    classification_fields,
    parse_label,
    write_classifications,
)
from apps.classify.submit import (
    MAX_ITEMS,
    ItemError,
    generation_config,
    prompt,
    validate_items,
)
from hookledger.cli.output import CliError
from hookledger.cli.submit_app import _validated, read_items
from shared import api
from shared.gemini import BatchStatus, BatchSummary, GeminiRowsUnread, Row

LABELS = ["bug", "feature", "question", "other"]


# --------------------------------------------------------------------------- registration


def test_the_app_declares_its_kind_settings_and_collection() -> None:
    assert (KIND.name, KIND.tag, KIND.app, KIND.needs) == (
        "batch-review-classify",
        "classify",
        "classify",
        ("keys",),
    )
    assert app.collections == frozenset({COLLECTION})
    assert classify_tag("s1") == "hookledger:classify:s1"
    settings = app.record.read_settings({})
    assert settings["CLASSIFY_MODEL"] == "models/gemini-2.5-flash"
    assert settings["CLASSIFY_LABELS"] == DEFAULT_LABELS
    assert app.record.read_settings({"CLASSIFY_LABELS": "a, b"})["CLASSIFY_LABELS"] == ("a", "b")


@pytest.mark.parametrize(("raw", "problem"), [(" , ", "at least one label"), ("a,b,a", "distinct")])
def test_bad_labels_settings_name_the_variable(raw: str, problem: str) -> None:
    with pytest.raises(api.ConfigError, match=f"CLASSIFY_LABELS.*{problem}"):
        app.record.read_settings({"CLASSIFY_LABELS": raw})


# --------------------------------------------------------------------------- input checks


def test_valid_items_come_back_in_order() -> None:
    items = [{"id": "a", "text": "crash on start"}, {"id": "b", "text": "add dark mode"}]
    assert validate_items(items) == [("a", "crash on start"), ("b", "add dark mode")]


@pytest.mark.parametrize(
    ("items", "index", "message"),
    [
        ([{"id": "", "text": "x"}], 0, 'non-empty string "id"'),
        ([{"id": "a", "text": "x"}, {"text": "y"}], 1, 'non-empty string "id"'),
        ([{"id": 7, "text": "x"}], 0, 'non-empty string "id"'),
        ([{"id": "a" * 201, "text": "x"}], 0, "at most 200 characters"),
        ([{"id": "a", "text": "  "}], 0, "id 'a'.*\"text\""),
        ([{"id": "a"}], 0, '"text"'),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], 1, "appears twice"),
        (["not an object"], 0, "must be an object"),
    ],
)
def test_a_bad_item_is_named(items: list[Any], index: int, message: str) -> None:
    with pytest.raises(ItemError, match=message) as caught:
        validate_items(items)
    assert caught.value.index == index
    assert str(caught.value).startswith(f"item {index + 1}:")


def test_an_id_of_exactly_200_characters_is_accepted() -> None:
    assert validate_items([{"id": "i" * 200, "text": "x"}])[0][0] == "i" * 200


def test_no_items_or_too_many_are_refused() -> None:
    with pytest.raises(api.PermanentError, match="no items"):
        validate_items([])
    many = [{"id": f"i{n}", "text": "x"} for n in range(MAX_ITEMS + 1)]
    with pytest.raises(api.PermanentError, match=f"at most {MAX_ITEMS}"):
        validate_items(many)
    assert len(validate_items(many[:MAX_ITEMS])) == MAX_ITEMS


def test_the_cli_names_the_line_of_a_bad_json_line_or_a_bad_item(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"id": "a", "text": "x"}\n\n{"id": "b", \n')
    with pytest.raises(CliError, match=r"bad\.jsonl:3: not valid JSON"):
        read_items(bad_json)
    not_object = tmp_path / "list.jsonl"
    not_object.write_text("[1, 2]\n")
    with pytest.raises(CliError, match=r"list\.jsonl:1: not a JSON object"):
        read_items(not_object)

    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"id": "a", "text": "x"}\n\n\n{"id": "b"}\n')
    items, numbers = read_items(missing)
    assert numbers == [1, 4]
    with pytest.raises(
        CliError, match=r'missing\.jsonl:4: \(id \'b\'\) needs a non-empty string "text"'
    ):
        _validated(validate_items, items, numbers, missing)


# --------------------------------------------------------------------------- requests


def test_the_prompt_names_the_labels_and_the_config_asks_for_json_with_an_enum() -> None:
    text = prompt("the app crashes when I click save", LABELS)
    assert "bug, feature, question, other" in text and "crashes when I click save" in text
    config = generation_config(LABELS)
    assert config["responseMimeType"] == "application/json"
    schema = config["responseSchema"]
    assert schema["properties"]["label"] == {"type": "STRING", "enum": LABELS}
    assert schema["properties"]["confidence"]["type"] == "NUMBER"
    assert schema["required"] == ["label", "confidence"]
    json.dumps(config)  # plain JSON, as the gateway sends it


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("text", "label", "confidence"),
    [
        ('{"label": "bug", "confidence": 0.9}', "bug", 0.9),
        ('{"confidence": 1, "label": " Feature "}', "feature", 1.0),
        ('```json\n{"label": "question", "confidence": 0.5}\n```', "question", 0.5),
        ('{"label": "other"}', "other", None),
        ('{"label": "other", "confidence": "high"}', "other", None),
        ('{"label": "other", "confidence": true}', "other", None),
        ('{"label": "bug", "confidence": 7}', "bug", 1.0),
        ('{"label": "bug", "confidence": -2}', "bug", 0.0),
    ],
)
def test_an_answer_gives_its_label_and_confidence(
    text: str, label: str, confidence: float | None
) -> None:
    answer = parse_label(text, LABELS)
    assert (answer.label, answer.confidence) == (label, confidence)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bug", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"confidence": 0.3}', "no label"),
        ('{"label": 3}', "no label"),
        ('{"label": "wontfix", "confidence": 0.3}', "'wontfix' is not one of"),
    ],
)
def test_an_answer_without_a_usable_label_is_refused(text: str, message: str) -> None:
    with pytest.raises(LabelError, match=message):
        parse_label(text, LABELS)


# --------------------------------------------------------------------------- write-back


class FakeWrites:
    """Records `put`s; refuses documents whose fields hold `refuse` (as Firestore might)."""

    def __init__(self, refuse: str | None = None) -> None:
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}
        self.refuse = refuse

    def put(
        self, collection: str, document: str, fields: dict[str, Any], *, replace: bool = True
    ) -> str:
        if self.refuse is not None and self.refuse in json.dumps(fields):
            raise api.PermanentError(f"{collection}/{document}: refused")
        self.docs[(collection, document)] = dict(fields)
        return document


def record(keys: list[str], labels: list[str] | None = LABELS, name: str = "batches/b1") -> Any:
    context: dict[str, Any] = {"keys": keys, "submission": "sub-1"}
    if labels is not None:
        context["labels"] = labels
    return SimpleNamespace(name=name, context=context)


def status(rows: list[Row], state: str = "JOB_STATE_SUCCEEDED", **kw: Any) -> BatchStatus:
    return BatchStatus(name="batches/b1", state=state, rows=tuple(rows), **kw)


def by_item(writes: FakeWrites) -> dict[str, dict[str, Any]]:
    found = {}
    for (collection, document), fields in writes.docs.items():
        assert collection == COLLECTION
        assert document == api.doc_id("sub-1", fields["item"])
        found[fields["item"]] = fields
    return found


def test_the_write_back_gives_every_item_one_document_ok_or_error() -> None:
    rows = [
        Row("a", text='{"label": "bug", "confidence": 0.8}'),
        Row("b", text='{"label": "wontfix", "confidence": 0.8}'),
        Row("c", error="INTERNAL: the model failed"),
        Row("d", text="not json at all"),
        Row("zz", text='{"label": "bug"}', unplaced=True),  # answers no request
    ]
    writes = FakeWrites()
    write_classifications(writes, record(["a", "b", "c", "d", "e"]), status(rows))

    docs = by_item(writes)
    assert set(docs) == {"a", "b", "c", "d", "e"}
    assert docs["a"] == {
        "submission": "sub-1",
        "item": "a",
        "label": "bug",
        "confidence": 0.8,
        "status": "ok",
        "error": None,
    }
    for item in "bcde":
        assert docs[item]["status"] == "error" and docs[item]["label"] is None, item
        assert set(docs[item]) == {"submission", "item", "label", "confidence", "status", "error"}
    assert "'wontfix' is not one of" in docs["b"]["error"]
    assert docs["c"]["error"] == "INTERNAL: the model failed"
    assert "not JSON" in docs["d"]["error"]
    assert docs["e"]["error"] == "no result for e in batches/b1"


def test_a_failed_batch_gives_every_item_its_error() -> None:
    failed = status([], state="JOB_STATE_FAILED", error={"code": 3, "message": "quota"})
    writes = FakeWrites()
    write_classifications(writes, record(["a", "b"]), failed)
    docs = by_item(writes)
    assert {item: d["error"] for item, d in docs.items()} == {"a": "quota", "b": "quota"}


def test_a_document_that_cannot_be_stored_becomes_that_items_error_only() -> None:
    rows = [
        Row("a", text='{"label": "bug", "confidence": 0.8}'),
        Row("b", text='{"label": "feature", "confidence": 0.4}'),
    ]
    writes = FakeWrites(refuse="feature")
    write_classifications(writes, record(["a", "b"]), status(rows))
    docs = by_item(writes)
    assert docs["a"]["status"] == "ok"
    assert docs["b"]["status"] == "error" and "could not be stored" in docs["b"]["error"]


def test_a_row_that_breaks_the_reader_is_that_items_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import apps.classify.kind as kind

    real = kind.parse_label

    def exploding(text: str, labels: Any) -> Any:
        if "boom" in text:
            raise RecursionError("nested too deep")
        return real(text, labels)

    monkeypatch.setattr(kind, "parse_label", exploding)
    rows = [Row("a", text='{"label": "boom"}'), Row("b", text='{"label": "other"}')]
    fields = dict(classification_fields(record(["a", "b"]), status(rows)))
    assert fields["a"]["status"] == "error" and "RecursionError" in fields["a"]["error"]
    assert fields["b"]["label"] == "other"


def test_a_transient_store_error_propagates() -> None:
    class Flaky(FakeWrites):
        def put(self, *args: Any, **kwargs: Any) -> str:
            raise api.TransientError("Firestore blinked")

    with pytest.raises(api.TransientError):
        write_classifications(Flaky(), record(["a"]), status([Row("a", text="{}")]))


def test_an_adopted_context_without_labels_uses_the_configured_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLASSIFY_LABELS", "spam,ham")
    rows = [Row("a", text='{"label": "spam"}'), Row("b", text='{"label": "bug"}')]
    fields = dict(classification_fields(record(["a", "b"], labels=None), status(rows)))
    assert fields["a"]["label"] == "spam"
    assert fields["b"]["status"] == "error" and "not one of ['spam', 'ham']" in fields["b"]["error"]


def test_a_context_naming_no_submission_is_permanent() -> None:
    bad = SimpleNamespace(name="batches/x", context={"keys": ["a"]})
    with pytest.raises(api.PermanentError, match="no submission"):
        write_classifications(FakeWrites(), bad, status([]))


# --------------------------------------------------------------------------- adoption


class FakeGateway:
    def __init__(self, fetched: BatchStatus) -> None:
        self.fetched = fetched
        self.calls: list[str] = []

    def fetch_batch(self, name: str) -> BatchStatus:
        self.calls.append(name)
        return self.fetched


def summary(state: str) -> BatchSummary:
    return BatchSummary("batches/o1", "hookledger:classify:sub-9", state, None)


def test_adoption_of_a_terminal_orphan_takes_the_keys_from_its_rows() -> None:
    gateway = FakeGateway(status([Row("a", text="x"), Row("", text="y"), Row("b", error="e")]))
    context = adopt("sub-9", summary("JOB_STATE_SUCCEEDED"), gateway)  # type: ignore[arg-type]
    assert context == {"keys": ["a", "b"], "submission": "sub-9"}


def test_adoption_of_a_running_orphan_knows_no_keys_yet() -> None:
    gateway = FakeGateway(status([]))
    assert adopt("sub-9", summary("JOB_STATE_RUNNING"), gateway) == {  # type: ignore[arg-type]
        "keys": [],
        "submission": "sub-9",
    }
    assert gateway.calls == []


def test_adoption_with_rows_unread_is_retried() -> None:
    gateway = FakeGateway(status([Row("a", text="x")], rows_unread="results file gone"))
    with pytest.raises(GeminiRowsUnread, match="rows unread"):
        adopt("sub-9", summary("JOB_STATE_SUCCEEDED"), gateway)  # type: ignore[arg-type]
