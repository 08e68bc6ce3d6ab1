"""The review pipeline called directly, with the real google-genai client against the simulator."""

from __future__ import annotations

import json

import pytest

from apps.review.kind import review_tag
from apps.review.pipeline import ReviewDeps, review_push
from apps.review.results import Reviews
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Attempt, Done, Ignored, PermanentError, RetryableError
from shared.ledger import Ledger

REPO, SHA = "octo-org/handbook", "a" * 40


def payload(files: list[str], ref: str = "refs/heads/main", deleted: bool = False) -> dict:
    return {
        "ref": ref,
        "after": SHA,
        "deleted": deleted,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": files, "modified": [], "removed": []}],
    }


@pytest.fixture
def deps(simulator, firestore_client) -> ReviewDeps:
    for path in ("docs/a.md", "docs/b.md", "notes/c.md"):
        simulator.control.put_file("octo-org", "handbook", path, SHA, f"# {path}\n".encode())
    gateway = GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1))
    return ReviewDeps(
        ledger=Ledger(firestore_client),
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
    )


def test_a_retry_after_a_crash_between_create_and_register_adopts_the_batch(deps, simulator):
    from datetime import timedelta

    from local.fakes import FakeClock
    from shared.crashpoints import Crashed, crashing_at

    clock = FakeClock()
    timed = ReviewDeps(**{**deps.__dict__, "clock": clock})
    files = payload(["docs/a.md", "docs/b.md"])
    with crashing_at("push.after_create"), pytest.raises(Crashed):
        review_push(files, "d1", timed, Attempt("run-1", clock() + timedelta(minutes=10)))
    with pytest.raises(RetryableError, match="run-1"):  # the dead run's lease still holds
        review_push(files, "d1", timed, Attempt("run-2", clock() + timedelta(minutes=10)))

    clock.advance(timedelta(minutes=10, seconds=1).total_seconds())
    outcome = review_push(files, "d1", timed, Attempt("run-3", clock() + timedelta(minutes=10)))

    [batch] = simulator.control.batches()
    assert isinstance(outcome, Done) and "already submitted" in outcome.detail
    record = deps.ledger.operations.get(batch["name"])
    assert record is not None and record.context["paths"] == ["docs/a.md", "docs/b.md"]
    assert record.kind == "github-review"


def test_the_batch_is_tagged_and_has_one_request_per_file_under_the_review_path(deps, simulator):
    outcome = review_push(
        payload(["docs/a.md", "notes/c.md", "docs/b.md", "docs/x.py"]), "d2", deps
    )

    assert isinstance(outcome, Done)
    [batch] = simulator.control.batches()
    assert batch["display_name"] == review_tag(REPO, SHA)
    keys = sorted(json.dumps(r) for r in batch["requests"])
    assert len(keys) == 2 and "docs/a.md" in keys[0] + keys[1] and "notes/c.md" not in "".join(keys)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("a push to another branch", payload(["docs/a.md"], ref="refs/heads/feature")),
        ("a deleted ref", payload([], deleted=True)),
        ("no Markdown under the path", payload(["notes/c.md", "docs/x.py"])),
    ],
)
def test_pushes_with_nothing_to_review_are_ignored(deps, simulator, name, body):
    assert isinstance(review_push(body, "d3", deps), Ignored), name
    assert simulator.control.batches() == [], name


def test_a_missing_file_is_permanent_and_a_flaky_one_retryable(deps, simulator):
    with pytest.raises(PermanentError, match=r"docs/missing\.md"):
        review_push(payload(["docs/missing.md"]), "d4", deps)
    simulator.control.github_fault("docs/a.md", status=503, count=2)
    with pytest.raises(RetryableError, match=r"docs/a\.md"):
        review_push(payload(["docs/a.md"]), "d5", deps)
    assert simulator.control.batches() == []


def test_a_malformed_push_is_permanent(deps):
    with pytest.raises(PermanentError, match="missing"):
        review_push({"ref": "refs/heads/main"}, "d6", deps)


def test_a_second_delivery_of_the_same_push_waits_while_the_first_holds_a_live_lease(
    deps, simulator
):
    from datetime import timedelta

    from local.fakes import FakeClock

    clock = FakeClock()
    tag = review_tag(REPO, SHA)
    first = deps.ledger.submissions.claim(
        tag,
        delivery_id="org-hook-delivery",
        attempt="org-run",
        lease_until=clock() + timedelta(minutes=10),
        now=clock(),
    )
    assert first.state.value == "owned"
    waiting = ReviewDeps(**{**deps.__dict__, "clock": clock})
    run = Attempt("repo-run", clock() + timedelta(minutes=10))

    with pytest.raises(RetryableError, match="org-hook-delivery"):
        review_push(payload(["docs/a.md"]), "repo-hook-delivery", waiting, run)
    assert simulator.control.batches() == []

    clock.advance(timedelta(minutes=11).total_seconds())  # the other lease ended
    later = Attempt("repo-run-2", clock() + timedelta(minutes=10))
    assert isinstance(
        review_push(payload(["docs/a.md"]), "repo-hook-delivery", waiting, later), Done
    )
    assert len(simulator.control.batches()) == 1


def test_a_run_with_too_little_lease_left_does_not_create(deps, simulator):
    from datetime import timedelta

    from local.fakes import FakeClock

    clock = FakeClock()
    late = ReviewDeps(**{**deps.__dict__, "clock": clock})
    run = Attempt("late-run", clock() + timedelta(seconds=10))

    with pytest.raises(RetryableError, match="too little"):
        review_push(payload(["docs/a.md"]), "d-late", late, run)
    assert simulator.control.batches() == []
    # The claim was released: the next attempt goes ahead at once.
    next_run = Attempt("next-run", clock() + timedelta(minutes=10))
    assert isinstance(review_push(payload(["docs/a.md"]), "d-late", late, next_run), Done)
    assert len(simulator.control.batches()) == 1


def test_findings_asked_of_the_model_become_the_review_rows_findings(deps, simulator):
    from shared.settlement.settler import Settler

    marked = b"# Handbook\n\nSome text.\n<!-- sim:findings=120 -->\n"
    simulator.control.put_file("octo-org", "handbook", "docs/many.md", SHA, marked)

    assert isinstance(review_push(payload(["docs/many.md", "docs/a.md"]), "d-json", deps), Done)
    [batch] = simulator.control.batches()
    for request in batch["requests"]:  # the SDK sent the structured-output config
        assert request["generation_config"]["responseMimeType"] == "application/json"
        assert "   1| " not in request["text"] and "1| # " in request["text"]
    simulator.control.complete(batch["name"], webhook="drop")
    Settler(deps.ledger, deps.gemini).settle(batch["name"], "webhook")

    many = Reviews(deps.ledger).get_review(REPO, SHA, "docs/many.md")
    plain = Reviews(deps.ledger).get_review(REPO, SHA, "docs/a.md")
    assert (many["status"], many["conclusion"], len(many["findings"])) == ("ok", "neutral", 120)
    assert "key=docs/many.md" in many["text"]  # the summary, not the JSON
    assert {f["start_line"] for f in many["findings"]} == {1, 2, 3, 4}
    assert (plain["findings"], plain["conclusion"]) == ([], "success")


def test_a_settled_reviews_findings_become_the_check_runs_annotations(deps, simulator):
    """The building blocks end to end (not yet wired into the outbox): the push's review
    rows -> `checks.completed` -> `ChecksClient.publish` -> 120 annotations in 50+50+20."""
    from datetime import UTC, datetime

    from apps.review import checks
    from shared.settlement.settler import Settler

    marked = b"# Handbook\n\nSome text.\n<!-- sim:findings=120 level=failure -->\n"
    simulator.control.put_file("octo-org", "handbook", "docs/many.md", SHA, marked)
    review_push(payload(["docs/many.md", "docs/a.md"]), "d-check", deps)
    [batch] = simulator.control.batches()
    client = simulator.github_checks()
    running = checks.in_progress(SHA, ["docs/a.md", "docs/many.md"], external_id=batch["name"])
    client.publish(REPO, SHA, running)
    simulator.control.complete(batch["name"], webhook="drop")
    Settler(deps.ledger, deps.gemini).settle(batch["name"], "webhook")

    reviews = Reviews(deps.ledger).reviews_for_push(REPO, SHA)
    done = checks.completed(
        SHA, reviews, external_id=batch["name"], completed_at=datetime(2026, 11, 30, tzinfo=UTC)
    )
    result = client.publish(REPO, SHA, done)

    [run] = simulator.control.check_runs(repo=REPO, sha=SHA)
    assert (result.check_run_id, result.created) == (run["id"], False)
    assert [(w["method"], w["annotations"]) for w in run["writes"]] == [
        ("POST", 0),
        ("PATCH", 50),
        ("PATCH", 50),
        ("PATCH", 20),
    ]
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert run["output"]["title"] == "120 failures in 2 files"
    assert "| `docs/many.md` | reviewed | 120 (120 failures) |" in run["output"]["summary"]
    assert {a["path"] for a in run["annotations"]} == {"docs/many.md"}


# --- one file never blocks a push; inputs checked before anything is fetched -----------

# One file name of 795 bytes: over the 255 bytes every common filesystem allows for a
# single name (Linux NAME_MAX, NTFS, APFS), so `check_path` refuses it before fetching.
LONG_NAME_PATH = "docs/" + "n" * 792 + ".md"


def github_fetches(simulator) -> list[str]:
    """The file reads the simulator's GitHub was asked for, one entry per request, in order:
    a Contents GET as its path, a GraphQL query as `graphql` and the files it named."""
    return [
        entry["path"]
        if entry["path"] != "/graphql"
        else "graphql " + " ".join(f.partition(":")[2] for f in entry.get("files", []))
        for entry in simulator.control.github_reads()
    ]


def reconciler(deps: ReviewDeps, clock):
    from shared.reconcile import Reconciler
    from shared.reconcile.settings import ReconcileSettings

    settings = ReconcileSettings(grace_s=90, budget_s=60, adopt_orphans=False)
    return Reconciler(deps.ledger, deps.gemini, clock, settings)


def test_a_file_with_an_800_character_path_is_an_error_review_and_the_push_settles(
    deps, simulator, firestore_client
):
    """The long path is refused because its file name is 795 bytes, over the 255-byte
    name limit of every common filesystem (`github.MAX_PATH_SEGMENT_BYTES`): no checkout
    could hold that file, so it is refused before any URL is built and recorded as that
    file's error review. The other file is reviewed, the operation settles through
    reconcile, and the next reconcile run no longer finds it due.
    """
    from local.fakes import FakeClock

    assert len(LONG_NAME_PATH) == 800
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    deps = ReviewDeps(**{**deps.__dict__, "ledger": ledger, "clock": clock})
    outcome = review_push(payload([LONG_NAME_PATH, "docs/a.md"]), "d-long", deps)

    assert isinstance(outcome, Done), outcome
    [batch] = simulator.control.batches()
    record = deps.ledger.operations.get(batch["name"])
    assert record.context["paths"] == ["docs/a.md"]
    assert [r["path"] for r in record.context["refused"]] == [LONG_NAME_PATH]
    assert github_fetches(simulator) == ["graphql docs/a.md"]

    simulator.control.complete(batch["name"], webhook="drop")  # the webhook is lost
    clock.advance(91)
    first = reconciler(deps, clock).run()
    assert first.settled == 1

    assert deps.ledger.operations.get(batch["name"]).status == "succeeded"
    normal = Reviews(deps.ledger).get_review(REPO, SHA, "docs/a.md")
    assert normal["status"] == "ok" and normal["text"]
    long = Reviews(deps.ledger).get_review(REPO, SHA, LONG_NAME_PATH)
    assert long["status"] == "error" and "255" in long["error"] and "text" not in long
    clock.advance(3600)
    assert reconciler(deps, clock).run().examined == 0


def test_a_long_path_of_short_names_is_reviewed_like_any_other(deps, simulator):
    """Length alone blocks nothing: review ids are hashes, so an 800-character path whose
    names are each short is fetched, reviewed and stored."""
    path = "docs/" + "/".join(["section"] * 99) + "/a.md"
    assert len(path) > 800
    simulator.control.put_file("octo-org", "handbook", path, SHA, b"# deep\n")

    assert isinstance(review_push(payload([path]), "d-deep", deps), Done)
    [batch] = simulator.control.batches()
    simulator.control.complete(batch["name"], webhook="drop")
    from shared.settlement.settler import Settler

    assert Settler(deps.ledger, deps.gemini).settle(batch["name"], "webhook").result == "settled"
    assert Reviews(deps.ledger).get_review(REPO, SHA, path)["status"] == "ok"


def test_refused_paths_are_never_fetched_and_become_error_reviews(deps, simulator):
    bad = ["docs/../secrets.md", "docs//a.md", "docs/./b.md"]
    outcome = review_push(payload([*bad, "docs/b.md"]), "d-dots", deps)

    assert isinstance(outcome, Done), outcome
    assert github_fetches(simulator) == ["graphql docs/b.md"]
    [batch] = simulator.control.batches()
    simulator.control.complete(batch["name"], webhook="drop")
    from shared.settlement.settler import Settler

    Settler(deps.ledger, deps.gemini).settle(batch["name"], "webhook")
    reviews = {r["path"]: r for r in Reviews(deps.ledger).reviews_for(batch["name"])}
    assert reviews["docs/b.md"]["status"] == "ok"
    for path in bad:
        assert reviews[path]["status"] == "error" and "segment" in reviews[path]["error"], path


def test_a_missing_file_among_others_is_an_error_review_not_a_dead_push(deps, simulator):
    outcome = review_push(payload(["docs/missing.md", "docs/a.md"]), "d-404", deps)

    assert isinstance(outcome, Done), outcome
    [batch] = simulator.control.batches()
    record = deps.ledger.operations.get(batch["name"])
    assert record.context["paths"] == ["docs/a.md"]
    assert record.context["refused"][0]["path"] == "docs/missing.md"
    assert record.context["refused"][0]["error"] == (
        f"{REPO}:docs/missing.md@{SHA[:12]}: not found at this commit"
    )


@pytest.mark.parametrize(
    ("name", "repo"),
    [
        ("dot-dot as the name", "octo-org/.."),
        ("extra segment", "octo-org/handbook/../../admin"),
        ("no owner", "/handbook"),
        ("query in the name", "octo-org/handbook?x=1"),
    ],
)
def test_a_malformed_repo_is_refused_with_nothing_fetched(deps, simulator, name, repo):
    body = payload(["docs/a.md"])
    body["repository"]["full_name"] = repo

    with pytest.raises(PermanentError, match="repository"):
        review_push(body, "d-repo", deps)
    assert simulator.control.requests_log() == [], name


def test_a_push_whose_every_path_is_refused_is_permanent_with_nothing_fetched(deps, simulator):
    with pytest.raises(PermanentError, match=r"every file was refused.*docs/\.\./x\.md"):
        review_push(payload(["docs/../x.md", "docs//y.md"]), "d-all-bad", deps)
    assert simulator.control.requests_log() == []


def test_an_unlisted_repo_is_ignored_before_any_fetch(deps, simulator):
    listed = ReviewDeps(**{**deps.__dict__, "repositories": ("octo-org/*",)})
    other = ReviewDeps(**{**deps.__dict__, "repositories": ("someone-else/*", "octo-org/wiki")})

    outcome = review_push(payload(["docs/a.md"]), "d-unlisted", other)

    assert isinstance(outcome, Ignored) and "GITHUB_REPOSITORIES" in outcome.detail
    assert simulator.control.requests_log() == []
    assert isinstance(review_push(payload(["docs/a.md"]), "d-listed", listed), Done)
    assert github_fetches(simulator) == ["graphql docs/a.md"]


def test_a_markdown_file_over_one_megabyte_is_fetched_raw_and_reviewed(deps, simulator):
    """GitHub's JSON form carries no content past 1 MB (encoding "none"); raw does."""
    import requests

    big = b"# Big\n\n" + b"A long handbook page.\n" * 80_000  # ~1.7 MB
    simulator.control.put_file("octo-org", "handbook", "docs/big.md", SHA, big)
    as_json = requests.get(
        f"{simulator.url}/repos/{REPO}/contents/docs/big.md", params={"ref": SHA}, timeout=10
    ).json()
    assert (as_json["encoding"], as_json["content"]) == ("none", "")

    outcome = review_push(payload(["docs/big.md"]), "d-big", deps)

    assert isinstance(outcome, Done)
    [batch] = simulator.control.batches()
    assert "A long handbook page." in json.dumps(batch["requests"])
