"""The capacity model: measured costs per event x documented limits x Terraform's settings.

    measured = Measured.from_benches(cost_json, ingress_cpu_s=..., worker_cpu_s=...)
    deployment = Deployment.from_terraform()          # terraform/variables.tf defaults
    result = model(measured, deployment)              # pure: same inputs, same answer
    render_markdown(result)                           # docs/performance.md "Scale"

One push, as the model counts it, is the GitHub push accepted and handled plus its
completion webhook settled by webhook (docs/performance.md "What it costs"): each goes through the
ingress once and the worker once (one Cloud Task each). Operations per event come from
bench/cost.py's output; CPU seconds per request from bench/ack.py or bench/e2e.py; the
latencies of production services, which no bench here can measure, from ASSUMED
(bench/_limits.py). Utilization = demand / limit: 1 or more binds.

Shared batches (docs/architecture.md "Shared batches") are derived, not measured: the
benches count one batch per push (REVIEW_GROUP_REQUESTS=0), and the model scales what a
batch costs (its create, its completion webhook through the ingress and the worker, its
fetches, the opener's deferred re-run) by the batches per push the review's sharing
settings give at a rate (`batches_per_push`); each push still joins and settles in its
own commits, so its Firestore operations stay the measured ones plus the join's writes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench._limits import ASSUMED, DOCUMENTED, PRICES, Documented
from shared.ledger.group_lanes import LANE_ITEMS, LANE_WRITES_PER_S, MAX_LANES

REPO = Path(__file__).resolve().parents[1]
TIERS = (10, 100, 1000)  # pushes per second, sustained
GEMINI_LIST_PAGE = 100  # batches per batches.list page (shared/gemini: page_size)
MEMBERS_PER_ITEM = 50  # items one members delivery settles, one batch read (shared/sharing)
# The 100 pushes/s sharing table: windows (s) x shards (docs/performance.md "Scale").
SHARING_WINDOWS_S = (60.0, 300.0, 600.0)
SHARING_SHARDS = (4, 16)


@dataclass(frozen=True)
class EventCost:
    """Billable calls of one event, as bench/cost.py counts them."""

    reads: float = 0
    writes: float = 0
    commits: float = 0
    transactions: float = 0
    create_task: float = 0
    gemini: float = 0
    github: float = 0  # every GitHub request, GraphQL included
    github_graphql: float = 0  # of which GraphQL queries (a push's files, 50 a query)
    writes_by_collection: Mapping[str, float] = field(default_factory=dict)
    reads_by_collection: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_cost(cls, figure: Mapping[str, Any]) -> EventCost:
        by = figure.get("by_collection", {})
        return cls(
            reads=float(figure.get("firestore_reads", 0)),
            writes=float(figure.get("firestore_writes", 0)),
            commits=float(figure.get("firestore_commits", 0)),
            transactions=float(figure.get("firestore_transactions", 0)),
            create_task=float(figure.get("tasks_create_task", 0)),
            gemini=float(figure.get("gemini_calls", 0)),
            github=float(figure.get("github_calls", 0)),
            github_graphql=float(figure.get("github_graphql_calls", 0)),
            writes_by_collection={
                k.split(":", 1)[1]: float(v) for k, v in by.items() if k.startswith("writes:")
            },
            reads_by_collection={
                k.split(":", 1)[1]: float(v) for k, v in by.items() if k.startswith("reads:")
            },
        )


@dataclass(frozen=True)
class Measured:
    """What the benches measured; `sources` says which run gave each part."""

    push: EventCost
    settle: EventCost
    reconcile_idle: EventCost
    ingress_cpu_s: float  # CPU seconds per accepted ingress request
    worker_cpu_s: float  # CPU seconds per worker request
    sources: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_benches(
        cls,
        cost: Mapping[str, Any],
        *,
        ingress_cpu_s: float,
        worker_cpu_s: float,
        sources: Mapping[str, str] | None = None,
    ) -> Measured:
        return cls(
            push=EventCost.from_cost(cost["accepted_push"]),
            settle=EventCost.from_cost(cost["settled_by_webhook"]),
            reconcile_idle=EventCost.from_cost(cost["reconcile_nothing_due"]),
            ingress_cpu_s=ingress_cpu_s,
            worker_cpu_s=worker_cpu_s,
            sources=dict(sources or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measured:
        return cls(
            push=EventCost(**data["push"]),
            settle=EventCost(**data["settle"]),
            reconcile_idle=EventCost(**data["reconcile_idle"]),
            ingress_cpu_s=float(data["ingress_cpu_s"]),
            worker_cpu_s=float(data["worker_cpu_s"]),
            sources=dict(data.get("sources", {})),
        )


@dataclass(frozen=True)
class Sizing:
    concurrency: int
    cpu: float
    max_instances: int
    memory_gib: float


@dataclass(frozen=True)
class Deployment:
    """The Terraform settings the model reads (terraform/variables.tf defaults)."""

    queue_rate: float  # queue.max_dispatches_per_second
    queue_concurrent: int  # queue.max_concurrent_dispatches
    ingress: Sizing
    worker: Sizing
    worker_request_s: float  # worker_request_seconds: the plan-time check's figure
    github_comments: bool  # review.github_comments
    reconcile_every_s: float  # scheduler.schedule
    reconcile_budget_s: float  # settings.reconcile_budget_s
    github_sweep_every_s: float = 300.0  # github_sweep.schedule
    github_sweep_full_pages: int = 10  # settings.github_sweep_full_pages
    # The review's shared batches (apps/review SETTINGS, or var.app_settings when it sets
    # them): sealed at `group_requests` requests or `group_window_s` after opening, with
    # up to `group_shards` groups open at once (more as joins meet). 0 requests: one batch per push.
    group_requests: int = 0
    group_window_s: float = 60.0
    group_shards: int = 1

    @classmethod
    def from_terraform(cls, terraform: Path = REPO / "terraform") -> Deployment:
        from bench._terraform import variable_defaults

        d = variable_defaults(terraform / "variables.tf")
        sharing = review_sharing(d.get("app_settings") or {})

        def sizing(name: str) -> Sizing:
            return Sizing(
                concurrency=int(d[f"{name}.concurrency"]),
                cpu=float(d[f"{name}.cpu"]),
                max_instances=int(d[f"{name}.max_instances"]),
                memory_gib=memory_gib(str(d[f"{name}.memory"])),
            )

        return cls(
            queue_rate=float(d["queue.max_dispatches_per_second"]),
            queue_concurrent=int(d["queue.max_concurrent_dispatches"]),
            ingress=sizing("ingress_function"),
            worker=sizing("worker_function"),
            worker_request_s=float(d["worker_request_seconds"]),
            github_comments=bool(d["review.github_comments"]),
            reconcile_every_s=cron_every_s(str(d["scheduler.schedule"])),
            reconcile_budget_s=float(d["settings.reconcile_budget_s"]),
            github_sweep_every_s=cron_every_s(str(d["github_sweep.schedule"])),
            github_sweep_full_pages=int(d["settings.github_sweep_full_pages"]),
            group_requests=int(sharing["REVIEW_GROUP_REQUESTS"]),
            group_window_s=float(sharing["REVIEW_GROUP_WINDOW_S"]),
            group_shards=int(sharing["REVIEW_GROUP_SHARDS"]),
        )

    @property
    def sharing(self) -> bool:
        return self.group_requests > 0


SHARING_SETTINGS = ("REVIEW_GROUP_REQUESTS", "REVIEW_GROUP_WINDOW_S", "REVIEW_GROUP_SHARDS")


def review_sharing(app_settings: Mapping[str, Any]) -> dict[str, Any]:
    """The review's sharing settings as deployed: the app's defaults (apps/review
    SETTINGS), overridden by Terraform's var.app_settings where it names them."""
    from apps.review import SETTINGS

    defaults = {s.name: s.default for s in SETTINGS if s.name in SHARING_SETTINGS}
    return defaults | {k: v for k, v in app_settings.items() if k in SHARING_SETTINGS}


def open_groups(rate: float, dep: Deployment) -> float:
    """Groups open at once at `rate` pushes/s: a join opens another only when it meets one
    (shared/ledger/group_lanes.py, `head_of`), and a group takes its joins in up to
    MAX_LANES lanes at LANE_WRITES_PER_S each, so about one group per MAX_LANES x
    LANE_WRITES_PER_S pushes a second, at least one and at most `group_shards`."""
    per_group = MAX_LANES * LANE_WRITES_PER_S
    return float(min(dep.group_shards, max(1, math.ceil(rate / per_group))))


def group_lanes(rate: float, dep: Deployment, files: float) -> float:
    """The lanes each open group has at `rate` (`lanes_for`): one per LANE_WRITES_PER_S of
    its joins, 1 to MAX_LANES, none holding fewer than LANE_ITEMS pushes."""
    wanted = math.ceil(rate / open_groups(rate, dep) / LANE_WRITES_PER_S)
    room = int(dep.group_requests / max(files, 1.0)) // LANE_ITEMS
    return float(max(1, min(MAX_LANES, room, wanted)))


def lane_writes(rate: float, dep: Deployment, files: float) -> float:
    """Writes a second to each lane document of the open groups (a join writes one)."""
    return rate / (open_groups(rate, dep) * group_lanes(rate, dep, files))


def batches_per_push(rate: float, dep: Deployment, files_per_push: float) -> float:
    """Gemini batches per push at `rate` pushes/s, sustained. Without sharing, one. With it,
    a group seals when full (rate x files / group_requests a second) or at its window (each
    of the groups open at `rate` at least once per window while items arrive), and never
    more than one batch per push."""
    if not dep.sharing:
        return 1.0
    if rate <= 0:
        return 1.0  # the limit as pushes grow rare: each waits its window alone
    opened = open_groups(rate, dep) / dep.group_window_s
    per_s = max(rate * files_per_push / dep.group_requests, opened)
    return min(rate, per_s) / rate


def memory_gib(memory: str) -> float:
    amount, unit = re.fullmatch(r"(\d+)([A-Za-z]+)", memory).groups()  # type: ignore[union-attr]
    return int(amount) * {"Mi": 2**20, "Gi": 2**30, "M": 10**6, "G": 10**9}[unit] / 2**30


def cron_every_s(schedule: str) -> float:
    """`*/5 * * * *` -> 300; any other minute field is taken as once an hour."""
    minute = schedule.split()[0]
    found = re.fullmatch(r"\*/(\d+)", minute)
    if found:
        return int(found.group(1)) * 60.0
    return 60.0 if minute == "*" else 3600.0


def queue_fits_worker(rate: float, request_s: float, max_instances: int, concurrency: int) -> bool:
    """terraform/tasks.tf's precondition: what the queue can send, the worker can hold."""
    return rate * request_s <= max_instances * concurrency


# ----------------------------------------------------------------------------- per push


@dataclass(frozen=True)
class PerPush:
    """One push end to end (accepted push + its settlement by webhook)."""

    ingress_requests: float
    worker_requests: float  # = Cloud Tasks dispatches
    create_task: float
    reads: float
    writes: float
    ttl_deletes: float
    writes_by_collection: Mapping[str, float]
    ops_by_collection: Mapping[str, float]
    batches: float  # Gemini batches per push: 1, or a share of a group's (derived)
    gemini_calls: float
    github_reads: float  # every GitHub request of a push: REST calls and GraphQL queries
    github_rest: float  # of which REST calls (a file GraphQL cut short, comments, checks)
    github_graphql: float  # of which GraphQL queries: ceil(Markdown files / 50)
    github_content: float
    ingress_request_s: float
    worker_request_s: float  # mean over the push's worker requests
    push_request_s: float
    settle_request_s: float
    largest_commit_writes: float
    worker_cpu_s: float  # worker CPU seconds per push: measured, the same with sharing
    group_document_writes: float = 0.0  # joins: each writes its group's document


def request_seconds(event: EventCost, gemini_call_s: float, a: Mapping[str, float]) -> float:
    """Wall time of one worker request: its sequential round trips x assumed latencies."""
    return (
        event.commits * a["firestore_commit_s"]
        + event.transactions * a["firestore_begin_s"]
        + event.reads * a["firestore_read_s"]
        + event.github * a["github_call_s"]
        + event.gemini * gemini_call_s
    )


def files_per_push(m: Measured) -> float:
    """Requests a push puts in a batch: the reviews its settlement writes (bench.cost's
    pushes carry 2 Markdown files)."""
    return max(1.0, m.settle.writes_by_collection.get("reviews", 1.0))


def per_push(m: Measured, dep: Deployment, a: Mapping[str, float], rate: float = 0.0) -> PerPush:
    """One push at `rate` pushes/s: the measured push and settlement, and with sharing what
    its share `b` of a batch costs (derived): per batch, its create (the opener's deferred
    re-run seals it: one more task and worker request), its completion webhook (ingress,
    task, worker) and its fetches; per push, the join (no Gemini call; 2 more writes: a
    lane of its group and the push's requests page) and its own settling commit."""
    push, settle = m.push, m.settle
    files = files_per_push(m)
    b = batches_per_push(rate, dep, files)
    collections = set(push.writes_by_collection) | set(settle.writes_by_collection)
    collections |= set(push.reads_by_collection) | set(settle.reads_by_collection)
    writes_by = {
        c: push.writes_by_collection.get(c, 0) + settle.writes_by_collection.get(c, 0)
        for c in collections
    }
    ops_by = {
        c: writes_by[c] + push.reads_by_collection.get(c, 0) + settle.reads_by_collection.get(c, 0)
        for c in collections
    }
    push_s = request_seconds(push, a["gemini_create_s"], a)
    settle_s = request_seconds(settle, a["gemini_get_s"], a)
    gemini = push.gemini + settle.gemini
    writes, join_writes, group_writes = push.writes + settle.writes, 0.0, 0.0
    if dep.sharing:
        # Per batch: the opener's re-run (a task) that seals it, its completion webhook.
        tasks = push.create_task + b * (1 + settle.create_task)
        join_s = request_seconds(replace(push, gemini=0), 0.0, a)
        # The item's own settling commit runs in its group's webhook request.
        item_s = settle.commits * a["firestore_commit_s"]
        worker_s = join_s + b * (push_s + settle_s) + item_s
        # One read of the batch per members delivery (50 items), at least one per batch.
        member_reads = b * math.ceil(1 / (b * MEMBERS_PER_ITEM) - 1e-9)
        gemini = b * (push.gemini + settle.gemini) + member_reads
        join_writes = group_writes = 1.0
        writes += 2 * join_writes
        for c in ("batch_groups", "group_requests"):
            writes_by[c] = writes_by.get(c, 0) + join_writes
            ops_by[c] = ops_by.get(c, 0) + join_writes
        ingress = push.create_task + b * settle.create_task
    else:
        tasks = push.create_task + settle.create_task
        worker_s = push_s * push.create_task + settle_s * settle.create_task
        ingress = tasks
    return PerPush(
        ingress_requests=ingress,
        worker_requests=tasks,
        create_task=tasks,
        reads=push.reads + settle.reads,
        writes=writes,
        ttl_deletes=a["ttl_deletes_per_push"],
        writes_by_collection=writes_by,
        ops_by_collection=ops_by,
        batches=b,
        gemini_calls=gemini,
        github_reads=push.github + settle.github,
        github_rest=push.github + settle.github - push.github_graphql - settle.github_graphql,
        github_graphql=push.github_graphql + settle.github_graphql,
        github_content=1.0 if dep.github_comments else 0.0,
        ingress_request_s=m.ingress_cpu_s + a["tasks_create_s"],
        worker_request_s=worker_s / tasks,
        push_request_s=push_s,
        settle_request_s=settle_s,
        largest_commit_writes=max(push.writes, settle.writes),
        # Measured with one batch per push; shared, each push still joins and settles.
        worker_cpu_s=m.worker_cpu_s * (push.create_task + settle.create_task),
        group_document_writes=group_writes,
    )


# ----------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class Limit:
    key: str
    what: str
    value: float | None
    unit: str
    source: str  # a URL, or the Terraform setting it is
    note: str
    kind: str  # "setting" (ours, in Terraform), "code" (ours, in shared/) or "documented"
    moves: str  # what raises it
    demand: Callable[[float], float] | None  # pushes/s -> demand in `unit`


def limits(
    m: Measured, dep: Deployment, at: Callable[[float], PerPush], a: Mapping[str, float]
) -> list[Limit]:
    """Every limit with its demand at r pushes/s; `at(r)` is one push at that rate."""
    doc = {d.key: d for d in DOCUMENTED}
    p = at(0.0)  # what does not vary with the rate

    def dispatches(r: float) -> float:
        return r * at(r).worker_requests

    def worker_flight(r: float) -> float:
        return dispatches(r) * at(r).worker_request_s

    def documented(key: str, moves: str, demand: Callable[[float], float] | None) -> Limit:
        d: Documented = doc[key]
        return Limit(d.key, d.what, d.value, d.unit, d.source, d.note, "documented", moves, demand)

    hottest = max(p.writes_by_collection, key=lambda c: p.writes_by_collection[c])
    busiest = max(p.ops_by_collection, key=lambda c: p.ops_by_collection[c])
    w, i = dep.worker, dep.ingress
    reconcile_doc_writes = m.reconcile_idle.writes_by_collection.get("reconcile_state", 0)
    return [
        Limit(
            "queue_rate",
            "queue dispatch rate",
            dep.queue_rate,
            "dispatches/s",
            "var.queue.max_dispatches_per_second",
            "",
            "setting",
            "queue.max_dispatches_per_second (up to 500)",
            dispatches,
        ),
        Limit(
            "queue_concurrency",
            "queue dispatches in flight",
            dep.queue_concurrent,
            "tasks in flight",
            "var.queue.max_concurrent_dispatches",
            "",
            "setting",
            "queue.max_concurrent_dispatches (up to 5,000)",
            worker_flight,
        ),
        Limit(
            "worker_in_flight",
            "worker requests in flight",
            w.max_instances * w.concurrency,
            "requests in flight",
            "var.worker_function: max_instances x concurrency",
            "beyond it Cloud Run refuses; Cloud Tasks retries with backoff",
            "setting",
            "worker_function.max_instances or .concurrency",
            worker_flight,
        ),
        Limit(
            "worker_cpu",
            "worker CPU",
            w.max_instances * w.cpu,
            "vCPU",
            "var.worker_function: max_instances x cpu",
            "",
            "setting",
            "worker_function.max_instances or .cpu",
            lambda r: r * p.worker_cpu_s,
        ),
        Limit(
            "ingress_in_flight",
            "ingress requests in flight",
            i.max_instances * i.concurrency,
            "requests in flight",
            "var.ingress_function: max_instances x concurrency",
            "beyond it senders get 429/503: GitHub does not retry (Redeliver by hand)",
            "setting",
            "ingress_function.max_instances (concurrency is bound by memory)",
            lambda r: r * at(r).ingress_requests * p.ingress_request_s,
        ),
        Limit(
            "ingress_cpu",
            "ingress CPU",
            i.max_instances * i.cpu,
            "vCPU",
            "var.ingress_function: max_instances x cpu",
            "",
            "setting",
            "ingress_function.max_instances or .cpu",
            lambda r: r * at(r).ingress_requests * m.ingress_cpu_s,
        ),
        Limit(
            "reconcile_listing",
            "reconcile's batches.list pages per run within its budget",
            dep.reconcile_budget_s,
            "seconds per run",
            "shared/reconcile/adoption.py, within var.settings.reconcile_budget_s",
            "adoption lists Gemini only while a claim is open (a crash between create and "
            "register), newest first, and stops past the oldest open one: none open, no "
            "listing; one crash, about one page. It no longer grows with pushes",
            "code",
            "(does not grow with pushes)",
            lambda r: a["gemini_list_page_s"],
        ),
        documented("tasks_queue_rate", "a second queue (not built)", dispatches),
        documented(
            "tasks_queue_concurrency",
            "a second queue (not built)",
            worker_flight,
        ),
        documented("tasks_api", "a quota increase", lambda r: r * at(r).create_task * 60),
        documented("run_concurrency", "(caps a setting)", None),
        documented(
            "run_regional_cpu",
            "a regional CPU quota increase",
            lambda r: (
                math.ceil(r * at(r).ingress_requests * p.ingress_request_s / i.concurrency) * i.cpu
                + math.ceil(worker_flight(r) / w.concurrency) * w.cpu
            ),
        ),
        documented(
            "firestore_sequential",
            f"exempting the sequential fields of `{hottest}` from single-field indexes "
            "(terraform/firestore.tf)",
            lambda r: r * p.writes_by_collection[hottest],
        ),
        documented(
            "firestore_ramp",
            f"ramping traffic to `{busiest}` up over minutes",
            lambda r: r * p.ops_by_collection[busiest],
        ),
        documented(
            "firestore_document",
            "(no per-push hot document)",
            lambda r: reconcile_doc_writes / dep.reconcile_every_s,
        ),
        Limit(
            "firestore_group_document",
            "Firestore sustained writes to one document of a shared batch's group (a join "
            "writes one of its group's lanes, a few bytes: its item is a document of its own)",
            doc["firestore_document"].value,
            "writes/s per lane",
            doc["firestore_document"].source,
            f"pushes/s / (groups open x their lanes): a group opens with a lane per "
            f"{_num(LANE_WRITES_PER_S)} joins/s, up to {MAX_LANES}; more groups open as "
            "joins meet, up to REVIEW_GROUP_SHARDS",
            "documented",
            "REVIEW_GROUP_SHARDS",
            lambda r: p.group_document_writes * lane_writes(r, dep, files_per_push(m)),
        ),
        documented(
            "firestore_commit",
            "(per commit: grows with files per push)",
            lambda r: p.largest_commit_writes,
        ),
        documented("firestore_database", "", None),
        documented(
            "gemini_batches",
            "a quota increase, or pushes per batch: REVIEW_GROUP_REQUESTS, "
            "REVIEW_GROUP_WINDOW_S, REVIEW_GROUP_SHARDS",
            lambda r: r * at(r).batches * a["gemini_batch_life_s"],
        ),
        documented("gemini_tokens", "a higher usage tier", None),
        documented(
            "github_primary",
            "a GitHub App: each installation has its own",
            lambda r: r * p.github_rest * 3600,
        ),
        documented(
            "github_graphql_primary",
            "a GitHub App: each installation has its own",
            lambda r: r * p.github_graphql * 3600,
        ),
        documented(
            "github_app_jwt",
            "fewer failed deliveries (past its full pages the sweep lists only those)",
            lambda r: github_sweep_calls_per_hour(r, dep, a),
        ),
        documented("github_endpoint", "(per endpoint: none)", lambda r: r * p.github_rest * 60),
        documented(
            "github_graphql_endpoint",
            "(one endpoint: none; up to 50 files a query already)",
            lambda r: r * p.github_graphql * 60,
        ),
        documented(
            "github_concurrent",
            "(none)",
            lambda r: r * p.github_reads * a["github_call_s"],
        ),
        documented(
            "github_content_minute",
            "review.github_comments = false",
            lambda r: r * p.github_content * 60,
        ),
        documented(
            "github_content_hour",
            "review.github_comments = false",
            lambda r: r * p.github_content * 3600,
        ),
    ]


def github_sweep_calls_per_hour(rate: float, dep: Deployment, a: Mapping[str, float]) -> float:
    """The GitHub delivery sweep's App-JWT calls an hour at `rate` pushes/s (one delivery
    each). A run's listing covers its interval plus the overlap: every delivery while they
    fit in its full pages (100 each; at least one page), else the full pages and then the
    failed ones only, 100 a page (shared/recovery/sweep.py); and two calls per failed
    delivery (a redelivery, and a read if that fails too)."""
    runs = 3600 / dep.github_sweep_every_s
    window = rate * (dep.github_sweep_every_s + a["github_sweep_overlap_s"])
    failed = rate * 3600 * a["github_failed_share"]
    if window <= dep.github_sweep_full_pages * 100:
        pages = max(1.0, window / 100)
    else:
        pages = dep.github_sweep_full_pages + max(1.0, window * a["github_failed_share"] / 100)
    return runs * pages + failed * 2


MAX_RATE = 1e6  # pushes/s: past it, a limit is taken never to bind


def binds_at(limit: Limit) -> float | None:
    """Pushes/s at which `limit` reaches 1; None if it never does or does not grow with
    pushes. Demands grow with the rate, not always linearly (a shared batch's share of a
    push falls as pushes fill groups faster), so the rate is found by bisection."""
    if limit.demand is None or not limit.value:
        return None
    low, high = 0.0, MAX_RATE
    if limit.demand(high) <= limit.demand(low) or limit.demand(high) < limit.value:
        return None
    if limit.demand(low) >= limit.value:
        return 0.0
    while high - low > 1e-4:
        middle = (low + high) / 2
        low, high = (middle, high) if limit.demand(middle) < limit.value else (low, middle)
    return round(high, 2)


def utilization(limit: Limit, rate: float) -> float | None:
    if limit.demand is None or not limit.value:
        return None
    return limit.demand(rate) / limit.value


# ----------------------------------------------------------------------------- tiers


def instances(in_flight: float, cpu_demand: float, sizing: Sizing) -> int:
    """Instances a function needs: for its requests in flight and for its CPU."""
    return max(
        math.ceil(in_flight / sizing.concurrency - 1e-9), math.ceil(cpu_demand / sizing.cpu - 1e-9)
    )


def billed_instances(in_flight: float, cpu_demand: float, sizing: Sizing) -> float:
    """Instance-seconds per second billed (request-based: an instance with a request in
    flight is billed whole)."""
    if in_flight <= 0:
        return 0.0
    return max(min(in_flight, 1.0), in_flight / sizing.concurrency, cpu_demand / sizing.cpu)


def queue_capacity(dep: Deployment, p: PerPush, m: Measured) -> float:
    """Dispatches/s the queue path sustains: the least of its settings and the worker."""
    w = dep.worker
    return min(
        dep.queue_rate,
        500.0,
        dep.queue_concurrent / p.worker_request_s,
        w.max_instances * w.concurrency / p.worker_request_s,
        w.max_instances * w.cpu / worker_cpu_per_request(p),
    )


def worker_cpu_per_request(p: PerPush) -> float:
    return p.worker_cpu_s / p.worker_requests if p.worker_cpu_s else 1e-12


def cost_per_hour(rate: float, m: Measured, dep: Deployment, p: PerPush) -> dict[str, float]:
    hour = 3600 * rate
    runs = 3600 / dep.reconcile_every_s
    price = {k: v.usd / v.per for k, v in PRICES.items()}
    firestore = (
        (hour * p.reads + runs * m.reconcile_idle.reads) * price["firestore_read"]
        + (hour * p.writes + runs * m.reconcile_idle.writes) * price["firestore_write"]
        + hour * p.ttl_deletes * price["firestore_delete"]
    )
    tasks = hour * (p.create_task + p.worker_requests) * price["tasks_operation"]
    run = 0.0
    for sizing, requests, request_s, cpu_s in (
        (dep.ingress, p.ingress_requests, p.ingress_request_s, m.ingress_cpu_s),
        (dep.worker, p.worker_requests, p.worker_request_s, worker_cpu_per_request(p)),
    ):
        billed = billed_instances(rate * requests * request_s, rate * requests * cpu_s, sizing)
        run += (
            3600
            * billed
            * (sizing.cpu * price["run_vcpu_s"] + sizing.memory_gib * price["run_gib_s"])
        )
        run += hour * requests * price["run_request"]
    return {
        "firestore": round(firestore, 2),
        "cloud_tasks": round(tasks, 2),
        "cloud_run": round(run, 2),
        "total": round(firestore + tasks + run, 2),
    }


def _ranked(
    found: Iterable[tuple[Limit, float | None]],
) -> list[dict[str, Any]]:
    rows = [
        {
            "limit": limit.key,
            "what": limit.what,
            "utilization": round(u, 3),
            "kind": limit.kind,
            "moves": limit.moves,
        }
        for limit, u in found
        if u is not None
    ]
    return sorted(rows, key=lambda row: -row["utilization"])


def tier(
    rate: float,
    base: float,
    seconds: float | None,
    m: Measured,
    dep: Deployment,
    at: Callable[[float], PerPush],
    all_limits: list[Limit],
) -> dict[str, Any]:
    """One row: `rate` pushes/s, sustained (`seconds` None) or for `seconds` over `base`."""
    p = at(rate)
    ranked = _ranked((limit, utilization(limit, rate)) for limit in all_limits)
    first = ranked[0]
    first_ours = next(row for row in ranked if row["kind"] == "setting")
    demand = rate * p.worker_requests
    capacity = queue_capacity(dep, p, m)
    if seconds is None:
        backlog = {"grows_per_s": round(max(0.0, demand - capacity), 1)}
    else:
        left = max(0.0, (demand - capacity) * seconds)
        spare = capacity - base * at(base).worker_requests
        backlog = {
            "after_burst": round(left),
            "drain_s": round(left / spare) if left and spare > 0 else (0 if not left else None),
        }
    ingress_flight = rate * p.ingress_requests * p.ingress_request_s
    worker_flight = demand * p.worker_request_s
    return {
        "pushes_per_s": rate,
        "burst_s": seconds,
        "burst_over": None if seconds is None else base,
        "binds_first": first,
        "first_of_our_settings": first_ours,
        "instances": {
            "ingress": instances(
                ingress_flight, rate * p.ingress_requests * m.ingress_cpu_s, dep.ingress
            ),
            "worker": instances(worker_flight, rate * p.worker_cpu_s, dep.worker),
            "reconcile": 1,  # one Scheduler call per interval
            "max": {"ingress": dep.ingress.max_instances, "worker": dep.worker.max_instances},
        },
        "queue": {
            "dispatches_per_s": round(demand, 1),
            "capacity_per_s": round(capacity, 1),
            "backlog_tasks": backlog,
        },
        "cost_per_hour_usd": cost_per_hour(rate, m, dep, p),
        "limits": ranked,
    }


def pushes_at(m: Measured, dep: Deployment, a: Mapping[str, float]) -> Callable[[float], PerPush]:
    """`per_push` as a function of the rate alone, remembered (limits ask it many times)."""
    seen: dict[float, PerPush] = {}

    def at(rate: float) -> PerPush:
        if rate not in seen:
            seen[rate] = per_push(m, dep, a, rate)
        return seen[rate]

    return at


def added_wait_s(rate: float, dep: Deployment, files: float) -> float:
    """The longest a push waits for its group to seal at `rate`: the window, or less when
    its group fills first (group_requests / each open group's requests a second)."""
    if not dep.sharing:
        return 0.0
    if rate <= 0:
        return dep.group_window_s
    fill_s = dep.group_requests * open_groups(rate, dep) / (rate * files)
    return min(dep.group_window_s, fill_s)


def sharing_at(rate: float, m: Measured, dep: Deployment, a: Mapping[str, float]) -> dict[str, Any]:
    """What one setting of the review's sharing gives at `rate` pushes/s, sustained."""
    files = files_per_push(m)
    b = batches_per_push(rate, dep, files)
    gemini = next(d for d in DOCUMENTED if d.key == "gemini_batches").value or 0
    document = next(d for d in DOCUMENTED if d.key == "firestore_document").value or 0
    in_flight = rate * b * a["gemini_batch_life_s"]
    writes = lane_writes(rate, dep, files) if dep.sharing else 0.0
    return {
        "window_s": dep.group_window_s,
        "shards": dep.group_shards,
        "batches_per_push": round(b, 4),
        "batches_per_s": round(rate * b, 3),
        "batches_in_flight": round(in_flight, 1),
        "gemini_batches_utilization": round(in_flight / gemini, 3),
        "group_lanes": group_lanes(rate, dep, files) if dep.sharing else 0.0,
        "group_document_writes_per_s": round(writes, 2),
        "group_document_utilization": round(writes / document, 3),
        "added_wait_s": round(added_wait_s(rate, dep, files), 1),
    }


def sharing_summary(m: Measured, dep: Deployment, a: Mapping[str, float]) -> dict[str, Any]:
    """The review's sharing as deployed, per tier, and at 100 pushes/s the windows x shards
    table (docs/performance.md "Scale"): batches in flight against the group documents'
    writes and the wait a longer window adds."""
    rate = 100.0
    return {
        "settings": {
            "REVIEW_GROUP_REQUESTS": dep.group_requests,
            "REVIEW_GROUP_WINDOW_S": dep.group_window_s,
            "REVIEW_GROUP_SHARDS": dep.group_shards,
        },
        "files_per_push": files_per_push(m),
        "tiers": [sharing_at(r, m, dep, a) | {"pushes_per_s": r} for r in TIERS],
        "at_100_pushes_per_s": [
            sharing_at(rate, m, replace(dep, group_window_s=window, group_shards=shards), a)
            for window in SHARING_WINDOWS_S
            for shards in SHARING_SHARDS
        ]
        if dep.sharing
        else [],
    }


def model(
    m: Measured,
    dep: Deployment,
    *,
    assume: Mapping[str, float] | None = None,
    tiers: Iterable[float] = TIERS,
) -> dict[str, Any]:
    """The whole answer, as plain data (JSON-ready); pure in its inputs."""
    a = {key: item.value for key, item in ASSUMED.items()} | dict(assume or {})
    at = pushes_at(m, dep, a)
    all_limits = limits(m, dep, at, a)
    factor, burst_s = a["burst_factor"], a["burst_s"]
    tiers = tuple(tiers)
    rows = []
    for rate in tiers:
        rows.append(tier(rate, rate, None, m, dep, at, all_limits))
        rows.append(tier(rate * factor, rate, burst_s, m, dep, at, all_limits))
    return {
        # At the first tier's rate: with sharing, a push's share of a batch depends on it.
        "per_push_at": tiers[0],
        "per_push": {
            k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(at(tiers[0])).items()
        },
        "assumed": a,
        "deployment": asdict(dep),
        "sharing": sharing_summary(m, dep, a),
        "queue_fits_worker": queue_fits_worker(
            dep.queue_rate, dep.worker_request_s, dep.worker.max_instances, dep.worker.concurrency
        ),
        "tiers": rows,
        "limits": [
            {
                "key": limit.key,
                "what": limit.what,
                "value": limit.value,
                "unit": limit.unit,
                "source": limit.source,
                "note": limit.note,
                "kind": limit.kind,
                "binds_at_pushes_per_s": binds_at(limit),
            }
            for limit in all_limits
        ],
    }


# ----------------------------------------------------------------------------- markdown


def _num(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _pct(u: float) -> str:
    return f"{u:,.1f}x" if u >= 1 else f"{u * 100:.0f}%"


def _backlog(row: Mapping[str, Any]) -> str:
    backlog = row["queue"]["backlog_tasks"]
    if row["burst_s"] is None:
        grows = backlog["grows_per_s"]
        return f"grows {_num(grows)}/s" if grows else "none"
    left, drain = backlog["after_burst"], backlog["drain_s"]
    if not left:
        return "none"
    return f"{_num(left)}, drained in " + (f"{_num(drain)} s" if drain is not None else "never")


def render_markdown(result: Mapping[str, Any]) -> str:
    """docs/performance.md "Scale": the tiers, then every limit, where it binds, its source."""
    lines = [
        "| pushes/s | binds first (demand / limit): what moves it | first of our settings "
        "| instances ingress / worker (max) | queue dispatches/s (takes); backlog "
        "| cost/hour: Firestore + Tasks + Run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["tiers"]:
        rate = _num(row["pushes_per_s"])
        label = (
            f"{rate} sustained"
            if row["burst_s"] is None
            else (f"burst: {rate} for {_num(row['burst_s'])} s over {_num(row['burst_over'])}")
        )
        first, ours = row["binds_first"], row["first_of_our_settings"]
        inst, queue, cost = row["instances"], row["queue"], row["cost_per_hour_usd"]
        lines.append(
            f"| {label} | {first['what']} ({_pct(first['utilization'])}): {first['moves']} "
            f"| {ours['what']} ({_pct(ours['utilization'])}): {ours['moves']} "
            f"| {inst['ingress']} / {inst['worker']} "
            f"({inst['max']['ingress']} / {inst['max']['worker']}) "
            f"| {_num(queue['dispatches_per_s'])} ({_num(queue['capacity_per_s'])}); "
            f"{_backlog(row)} "
            f"| ${cost['total']:,.2f}: {cost['firestore']:,.2f} + {cost['cloud_tasks']:,.2f} "
            f"+ {cost['cloud_run']:,.2f} |"
        )
    lines += [
        "",
        "| limit | value | binds at pushes/s | source |",
        "| --- | --- | --- | --- |",
    ]
    for limit in result["limits"]:
        value = "-" if limit["value"] is None else f"{_num(limit['value'])} {limit['unit']}"
        at = limit["binds_at_pushes_per_s"]
        binds = "-" if at is None else _num(at)
        source = limit["source"] if limit["kind"] != "documented" else f"<{limit['source']}>"
        note = f" ({limit['note']})" if limit["note"] else ""
        lines.append(f"| {limit['what']}{note} | {value} | {binds} | {source} |")
    lines += render_sharing(result["sharing"])
    return "\n".join(lines) + "\n"


def render_sharing(sharing: Mapping[str, Any]) -> list[str]:
    """The review's sharing settings, and at 100 pushes/s what window and shards trade."""
    settings = ", ".join(f"{k} = {_num(v)}" for k, v in sharing["settings"].items())
    if not sharing["at_100_pushes_per_s"]:
        return ["", f"Shared batches off ({settings}): one batch per push."]
    lines = [
        "",
        f"Shared batches as deployed: {settings}; "
        f"{_num(sharing['files_per_push'])} requests per push. At 100 pushes/s sustained:",
        "",
        "| window_s | shards | batches/s | batches in flight (limit 100) | lanes a group "
        "| writes/s per lane document (limit 1) | a push waits for its group up to |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in sharing["at_100_pushes_per_s"]:
        lines.append(
            f"| {_num(row['window_s'])} | {_num(row['shards'])} | {_num(row['batches_per_s'])} "
            f"| {_num(row['batches_in_flight'])} ({_pct(row['gemini_batches_utilization'])}) "
            f"| {_num(row['group_lanes'])} | {_num(row['group_document_writes_per_s'])} "
            f"({_pct(row['group_document_utilization'])}) | {_num(row['added_wait_s'])} s |"
        )
    return lines
