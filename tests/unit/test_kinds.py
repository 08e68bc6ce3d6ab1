"""The operation-kind registry: tags, lookups, the generic kind, deliverer dispatch."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from apps.review.comments import MAX_COMMENT_CHARS, comment_body, item
from apps.review.kind import KIND, REVIEW, ReviewOptions, review_tag
from shared import kinds
from shared.errors import PermanentError, retryable
from shared.kinds import Deliverers, NoDeliverer, OperationKind
from shared.ledger import OutboxItem


def outbox_item(payload: Any) -> OutboxItem:
    return OutboxItem(operation="batches/b1", index=0, idempotency_key="k:0", payload=payload)


@pytest.mark.parametrize(
    ("name", "display_name", "kind", "key"),
    [
        ("review tag", "hookledger:review:octo/docs@abc123", KIND, "octo/docs@abc123"),
        ("generic tag", "hookledger:nightly-eval:1f2e3d", "nightly-eval", "1f2e3d"),
        ("key keeps colons", "hookledger:x:a:b", "x", "a:b"),
    ],
)
def test_parse_tag_names_the_kind_and_key(name, display_name, kind, key) -> None:
    parsed = kinds.parse_tag(display_name)
    assert parsed is not None, name
    assert (parsed.kind.name, parsed.key) == (kind, key), name


@pytest.mark.parametrize(
    "display_name",
    [
        "",
        "review:octo@abc",
        "hookledger:",
        "hookledger:review",
        "hookledger:review:",
        "hookledger:Bad:k",
    ],
)
def test_parse_tag_refuses_what_is_not_ours(display_name: str) -> None:
    assert kinds.parse_tag(display_name) is None


def test_review_tag_round_trips_through_the_registry() -> None:
    tag = review_tag("octo/docs", "abc")
    parsed = kinds.parse_tag(tag)
    assert tag == "hookledger:review:octo/docs@abc"
    assert parsed is not None and parsed.kind is REVIEW and parsed.key == "octo/docs@abc"


def test_an_unregistered_kind_gets_the_generic_behaviour() -> None:
    generic = kinds.get("nightly-eval")
    assert (generic.name, generic.tag, generic.writeback, generic.outbox) == (
        "nightly-eval",
        "nightly-eval",
        None,
        None,
    )
    assert generic.adopt is not None
    assert kinds.get(KIND) is REVIEW


def test_built_in_covers_names_and_tags_of_kind_modules_only() -> None:
    assert kinds.built_in(KIND) and kinds.built_in("review")
    assert not kinds.built_in("nightly-eval")


def test_registering_a_different_kind_under_a_taken_name_or_tag_fails() -> None:
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(OperationKind(name=KIND, tag="other-tag"))
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(OperationKind(name="other-name", tag="review"))
    with pytest.raises(ValueError, match="must match"):
        kinds.register(OperationKind(name="Bad Name", tag="bad"))


def test_review_outbox_only_when_comments_are_on() -> None:
    from shared.gemini import BatchStatus
    from shared.ledger import Operation

    record = Operation(
        name="batches/b1",
        doc_id="batches%2Fb1",
        kind=KIND,
        status="pending",
        submitted_at=None,  # type: ignore[arg-type]
        attempts=0,
        next_check_at=None,
        writeback_done=False,
        context={"repo": "octo/docs", "sha": "abc", "paths": []},
    )
    batch = BatchStatus(name="batches/b1", state="JOB_STATE_SUCCEEDED")
    assert REVIEW.outbox is not None
    assert REVIEW.outbox(record, batch, ReviewOptions(github_comments=False)) == []
    assert REVIEW.outbox(record, batch, ReviewOptions(github_comments=True)) == [
        item("octo/docs", "abc", "batches/b1")
    ]


@dataclass
class Recorder:
    calls: list[Any]

    @property
    def ledger(self) -> Any:
        return self

    @property
    def results(self) -> Any:
        return self

    @property
    def comments(self) -> Any:
        return self

    @property
    def operations(self) -> Any:
        return self

    def get(self, name: str) -> Any:
        """The operation as recorded: named by no submission, so its push's current one."""
        return SimpleNamespace(name=name, context={}, submission=None)

    def find(self, collection: str, *args: Any, **equals: Any) -> list[dict[str, Any]]:
        return [{"path": "docs/a.md", "text": "fine"}]

    def publish_once(
        self,
        repo: str,
        sha: str,
        marker: str,
        body: str,
        *,
        ownership: Any,
        also: Any,
        installation_id: int | None = None,
    ) -> Any:
        self.calls.append((repo, sha, marker, body, tuple(also)))

        @dataclass
        class Result:
            comment_id: int = 7
            created: bool = True
            deleted: tuple[int, ...] = ()
            updated: bool = False

        return Result()


def test_deliverers_dispatch_by_payload_kind() -> None:
    recorder = Recorder([])
    Deliverers(recorder)(outbox_item(item("octo/docs", "abc123", "batches/b1")))
    [(repo, sha, marker, body, also)] = recorder.calls
    assert (repo, sha) == ("octo/docs", "abc123")
    assert marker == "<!-- hookledger:review:octo/docs@abc123 -->"  # one per push
    assert also == ("<!-- hookledger:review:batches/b1 -->",)  # the old per-operation one
    assert "docs/a.md" in body and "fine" in body


@pytest.mark.parametrize(
    ("name", "payload", "services", "error", "message"),
    [
        # A deployment can fix these: retried with backoff, not given up at once.
        ("unknown payload kind", {"kind": "fax"}, Recorder([]), NoDeliverer, "no outbox deliverer"),
        ("payload not a mapping", ["x"], Recorder([]), NoDeliverer, "no outbox deliverer"),
        ("no services", item("o/r", "abc", "batches/b1"), None, NoDeliverer, "no outbox services"),
        (
            "payload missing fields",
            {"kind": "github-comment"},
            Recorder([]),
            PermanentError,
            "not a github-comment",
        ),
    ],
)
def test_deliverers_refuse_what_they_cannot_deliver(
    name, payload, services, error, message
) -> None:
    with pytest.raises(error, match=message) as raised:
        Deliverers(services)(outbox_item(payload))
    assert retryable(raised.value) is (error is NoDeliverer), name


def test_comment_body_stays_under_githubs_limit() -> None:
    reviews = [{"path": f"docs/{n}.md", "text": "x" * 10_000} for n in range(40)]
    body = comment_body("abc123", reviews)
    assert len(body) <= MAX_COMMENT_CHARS + 10
    assert body.startswith("**hookledger review** of `abc123`")
    errored = comment_body("abc", [{"path": "docs/e.md", "error": "row failed"}])
    assert "_error_: row failed" in errored


# --- the review write-back: one document per file, one file never blocks the others ---


class Writes:
    """Records the reviews put; refuses the paths in `refuse` like the ledger would."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.reviews: dict[str, dict[str, Any]] = {}
        self._refuse = refuse

    def put(self, collection: str, document: str, fields: Any, *, replace: bool = True) -> str:
        from shared.ledger import InvalidArgument

        path, repo, sha = fields["path"], fields["repo"], fields["sha"]
        if path in self._refuse and fields.get("status") == "ok":
            raise InvalidArgument(f"review {repo}@{sha}:{path}: 1200000 bytes, over 1000000")
        self.reviews[path] = {k: v for k, v in fields.items() if k not in ("repo", "sha", "path")}
        return document


def review_record(context: dict[str, Any]) -> Any:
    from shared.ledger import Operation

    return Operation(
        name="batches/b1",
        doc_id="batches%2Fb1",
        kind=KIND,
        status="pending",
        submitted_at=None,  # type: ignore[arg-type]
        attempts=0,
        next_check_at=None,
        writeback_done=False,
        context={"repo": "octo/docs", "sha": "abc", **context},
    )


def test_each_file_gets_its_own_status_and_refused_files_their_reason() -> None:
    from shared.gemini import BatchStatus, Row

    record = review_record(
        {
            "paths": ["a.md", "b.md", "c.md"],
            "refused": [{"path": "docs/../x.md", "error": "path has a '..' segment"}],
        }
    )
    rows = (Row("a.md", text="fine"), Row("b.md", error="row failed"))
    writes = Writes()
    assert REVIEW.writeback is not None

    REVIEW.writeback(writes, record, BatchStatus("batches/b1", "JOB_STATE_SUCCEEDED", rows=rows))  # type: ignore[arg-type]

    assert writes.reviews == {
        "a.md": {"status": "ok", "text": "fine"},
        "b.md": {"status": "error", "error": "row failed"},
        "c.md": {"status": "error", "error": "no result for c.md in batches/b1"},
        "docs/../x.md": {"status": "error", "error": "path has a '..' segment"},
    }


def test_a_review_the_ledger_refuses_becomes_that_files_error_only() -> None:
    from shared.gemini import BatchStatus, Row

    record = review_record({"paths": ["a.md", "big.md"]})
    rows = (Row("a.md", text="fine"), Row("big.md", text="huge"))
    writes = Writes(refuse=("big.md",))
    assert REVIEW.writeback is not None

    REVIEW.writeback(writes, record, BatchStatus("batches/b1", "JOB_STATE_SUCCEEDED", rows=rows))  # type: ignore[arg-type]

    assert writes.reviews["a.md"] == {"status": "ok", "text": "fine"}
    assert writes.reviews["big.md"]["status"] == "error"
    assert "could not be stored" in writes.reviews["big.md"]["error"]


def test_an_over_long_review_is_clipped_and_flagged() -> None:
    from apps.review.kind import MAX_REVIEW_CHARS
    from shared.gemini import BatchStatus, Row

    record = review_record({"paths": ["a.md"]})
    rows = (Row("a.md", text="x" * (MAX_REVIEW_CHARS + 10)),)
    writes = Writes()
    assert REVIEW.writeback is not None

    REVIEW.writeback(writes, record, BatchStatus("batches/b1", "JOB_STATE_SUCCEEDED", rows=rows))  # type: ignore[arg-type]

    assert writes.reviews["a.md"]["truncated"] is True
    assert len(writes.reviews["a.md"]["text"]) == MAX_REVIEW_CHARS + 1
