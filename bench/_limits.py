"""The documented limits, prices and planning assumptions bench/capacity.py's model uses.

Every limit carries the page it was read from (docs/performance.md "Scale" prints them); where two
Google pages or an SDK and a page disagree, `note` says so. Read 2026-12-01; check them
before planning. Nothing here is measured: what a bench measures (operations per event,
CPU seconds) comes from the benches' own output (bench/_capacity.py, `Measured`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Documented:
    """A limit a provider documents: `value` in `unit`, from `source`."""

    key: str
    what: str
    value: float | None  # None: documented, but without one number to plan with
    unit: str
    source: str
    note: str = ""


TASKS_QUOTAS = "https://cloud.google.com/tasks/docs/quotas"
TASKS_RATE_LIMITS = "https://cloud.google.com/php/docs/reference/cloud-tasks/1.14.4/V2.RateLimits"
TASKS_PROTO = (
    "https://github.com/googleapis/googleapis/blob/master/google/cloud/tasks/v2/queue.proto"
)
RUN_CONCURRENCY = "https://cloud.google.com/run/docs/about-concurrency"
RUN_MAX_INSTANCES = "https://cloud.google.com/run/docs/configuring/max-instances-limits"
RUN_PRICING = "https://cloud.google.com/run/pricing"
FIRESTORE_BEST = "https://cloud.google.com/firestore/docs/best-practices"
FIRESTORE_LATENCY = "https://cloud.google.com/firestore/docs/resolve-latency"
FIRESTORE_QUOTAS = "https://cloud.google.com/firestore/quotas"
FIRESTORE_NOTES = "https://cloud.google.com/firestore/docs/release-notes"
FIRESTORE_TRANSACTIONS = "https://cloud.google.com/firestore/docs/manage-data/transactions"
GEMINI_LIMITS = "https://ai.google.dev/gemini-api/docs/rate-limits"
GITHUB_LIMITS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
GITHUB_GRAPHQL_LIMITS = (
    "https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api"
)

DOCUMENTED: tuple[Documented, ...] = (
    Documented(
        "tasks_queue_rate",
        "Cloud Tasks dispatch rate per queue",
        500,
        "dispatches/s",
        TASKS_QUOTAS,
        'a system limit ("use multiple queues"); RateLimits.max_dispatches_per_second '
        "says the same maximum (" + TASKS_RATE_LIMITS + ")",
    ),
    Documented(
        "tasks_queue_concurrency",
        "Cloud Tasks max_concurrent_dispatches",
        5000,
        "tasks in flight",
        TASKS_PROTO,
        "the v2 API's RateLimits comment; the quotas page does not list it",
    ),
    Documented(
        "tasks_api",
        "Cloud Tasks API requests per region",
        6_000_000,
        "requests/min",
        TASKS_QUOTAS,
        'a quota (can be raised); task size 1 MiB; the dedupe window reads "up to 24 '
        'hours" in the current page and "about 1 hour" in older copies',
    ),
    Documented(
        "run_concurrency",
        "Cloud Run requests per instance",
        1000,
        "concurrent requests",
        RUN_CONCURRENCY,
        "caps each function's `concurrency`",
    ),
    Documented(
        "run_regional_cpu",
        "Cloud Run CPU per region (all services)",
        1000,
        "vCPU",
        RUN_MAX_INSTANCES,
        "the page's example baseline; the real quota depends on the region (quotas page). "
        "Older copies said a service defaults to 100 instances at most; the current page "
        "derives the maximum from the regional CPU and memory quotas",
    ),
    Documented(
        "firestore_sequential",
        "Firestore writes/s to a collection whose documents carry a sequentially "
        "increasing indexed field",
        500,
        "writes/s per collection",
        FIRESTORE_BEST,
        "lifted for a field whose single-field indexes are exempted; a composite index "
        "ending in a timestamp (operations' due query) keeps it",
    ),
    Documented(
        "firestore_ramp",
        "Firestore 500/50/5 rule: start a new collection at 500 operations/s, then +50% "
        "every 5 minutes",
        500,
        "operations/s per collection",
        FIRESTORE_BEST,
        "guidance, not an error: " + FIRESTORE_LATENCY + " names traffic beyond it as a "
        "cause of latency while Firestore splits",
    ),
    Documented(
        "firestore_document",
        "Firestore sustained writes to one document",
        1,
        "writes/s",
        FIRESTORE_QUOTAS,
        "the older quota table's figure; the current best-practices page says the rate "
        '"depends on the workload" and names contention instead',
    ),
    Documented(
        "firestore_commit",
        "Firestore writes in one commit or transaction",
        500,
        "writes",
        FIRESTORE_TRANSACTIONS,
        "copies of this page and the Firebase SDK's WriteBatch docstring say 500; a "
        "settlement writes one review per file in its commit",
    ),
    Documented(
        "firestore_database",
        "Firestore writes/s per database",
        None,
        "writes/s",
        FIRESTORE_NOTES,
        "the former 10,000 writes/s per database no longer applies (release notes, "
        "2022-10-17); older third-party copies still quote it",
    ),
    Documented(
        "gemini_batches",
        "Gemini Batch API concurrent batch requests",
        100,
        "batches in flight",
        GEMINI_LIMITS,
        "per project; the copy of the page we could read ends before its Batch section: "
        "the figure (and 2 GB input files, 20 GB file storage) is from copies that quote "
        "it, and it may count batch jobs not yet finished, which is how the model uses it",
    ),
    Documented(
        "gemini_tokens",
        "Gemini Batch API enqueued tokens per model",
        None,
        "tokens",
        GEMINI_LIMITS,
        "per model and usage tier (millions to billions); not modelled: no bench counts "
        "tokens per push",
    ),
    Documented(
        "github_primary",
        "GitHub REST primary rate limit, personal token",
        5000,
        "requests/h",
        GITHUB_LIMITS,
        "a GitHub App installation gets 5,000 rising with repositories and users to "
        "12,500 (15,000 on Enterprise Cloud); GITHUB_TOKEN is one token",
    ),
    Documented(
        "github_app_jwt",
        "GitHub App's own requests (App JWT: its webhook deliveries)",
        5000,
        "requests/h",
        GITHUB_LIMITS,
        "no separate figure is documented for requests made with the App JWT; taken as the "
        "documented minimum of an authenticated client, 5,000 an hour. The GitHub delivery "
        "sweep lists up to 10 pages of every delivery a run, then failed ones only (100 a "
        "page), and spends about two calls per failed one",
    ),
    Documented(
        "github_endpoint",
        "GitHub secondary limit: points per minute to one REST endpoint (a GET is 1)",
        900,
        "points/min",
        GITHUB_LIMITS,
        "a push reads REST only for a file GraphQL cuts short (over ~500 kB)",
    ),
    Documented(
        "github_graphql_endpoint",
        "GitHub secondary limit: points per minute to the GraphQL endpoint (a query is 1)",
        2000,
        "points/min",
        GITHUB_LIMITS,
        "a push's files are read by GraphQL, up to 50 a query (shared/github/blobs.py)",
    ),
    Documented(
        "github_graphql_primary",
        "GitHub GraphQL primary rate limit, personal token",
        5000,
        "points/h",
        GITHUB_GRAPHQL_LIMITS,
        "a query with no connection costs 1 point; apart from the REST limit. A GitHub App "
        "installation gets 5,000 rising to 12,500 as for REST",
    ),
    Documented(
        "github_concurrent",
        "GitHub secondary limit: concurrent requests",
        100,
        "requests in flight",
        GITHUB_LIMITS,
    ),
    Documented(
        "github_content_minute",
        "GitHub secondary limit: content-creating requests per minute",
        80,
        "requests/min",
        GITHUB_LIMITS,
        "only with review.github_comments (one commit comment per push)",
    ),
    Documented(
        "github_content_hour",
        "GitHub secondary limit: content-creating requests per hour",
        500,
        "requests/h",
        GITHUB_LIMITS,
        "only with review.github_comments",
    ),
)


@dataclass(frozen=True)
class Price:
    key: str
    usd: float
    per: float  # units the price is for
    unit: str
    source: str


COSTS_PAGE = 'docs/performance.md "What it costs"'
# US regional (e.g. us-central1): docs/performance.md "What it costs" figures and sources, plus
# Cloud Run's request-based billing (CPU only during requests, the functions' default).
# Free tiers are left out: at these rates they are noise.
PRICES: dict[str, Price] = {
    p.key: p
    for p in (
        Price("firestore_read", 0.03, 100_000, "document reads", COSTS_PAGE),
        Price("firestore_write", 0.09, 100_000, "document writes", COSTS_PAGE),
        Price("firestore_delete", 0.01, 100_000, "TTL deletes", COSTS_PAGE),
        Price(
            "tasks_operation",
            0.40,
            1_000_000,
            "billable operations (API calls + push attempts)",
            "https://cloud.google.com/tasks/docs/pricing",
        ),
        Price("run_vcpu_s", 0.000024, 1, "vCPU-second (Tier 1, request-based)", RUN_PRICING),
        Price("run_gib_s", 0.0000025, 1, "GiB-second (Tier 1, request-based)", RUN_PRICING),
        Price("run_request", 0.40, 1_000_000, "requests", RUN_PRICING),
    )
}


@dataclass(frozen=True)
class Assumed:
    key: str
    value: float
    why: str


# What no bench here can measure: latencies of the production services (the benches run
# against emulators on a shared machine) and how long Gemini takes. Each is a planning
# figure, overridable with `--assume key=value`.
ASSUMED: dict[str, Assumed] = {
    a.key: a
    for a in (
        Assumed("firestore_commit_s", 0.05, "one regional commit round trip"),
        Assumed("firestore_read_s", 0.02, "per document read (lookups, small queries)"),
        Assumed("firestore_begin_s", 0.02, "BeginTransaction round trip"),
        Assumed("tasks_create_s", 0.05, "one CreateTask round trip"),
        Assumed("github_call_s", 0.3, "one GitHub read: a GraphQL query of a push's files"),
        Assumed("gemini_create_s", 1.0, "batches.create with 2 inline requests"),
        Assumed("gemini_get_s", 0.3, "batches.get (status, rows, raw stats)"),
        Assumed(
            "gemini_batch_life_s",
            300,
            'create -> terminal; Gemini promises only "within 24 h" (2 small requests)',
        ),
        Assumed(
            "gemini_listed_s",
            48 * 3600,
            "how long a batch stays in batches.list (pending jobs expire after 48 h)",
        ),
        Assumed("gemini_list_page_s", 0.1, "one batches.list page of 100"),
        Assumed(
            "ttl_deletes_per_push",
            4,
            'operation, submission, 2 deliveries expire (docs/performance.md "What it costs")',
        ),
        Assumed(
            "github_failed_share",
            0.01,
            "share of GitHub deliveries that fail (deploys, outages, slow answers): each costs "
            "the sweep a redelivery and, if that fails too, a read of the delivery",
        ),
        Assumed("github_sweep_overlap_s", 60, "SweepSettings.overlap: listed again next run"),
        Assumed("burst_factor", 10, "the burst: 10x the tier's rate"),
        Assumed("burst_s", 60, "for one minute"),
    )
}
