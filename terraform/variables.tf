# Alphabetical. Only `project_id` has no default; see README.md "Deploy".

variable "alerts" {
  description = "Alert thresholds: the ingress 5xx ratio (0-1) over a window of `ingress_5xx_window_s` seconds that opens an incident."
  type = object({
    ingress_5xx_ratio    = optional(number, 0.05)
    ingress_5xx_window_s = optional(number, 300)
  })
  default = {}

  validation {
    condition     = var.alerts.ingress_5xx_ratio > 0 && var.alerts.ingress_5xx_ratio < 1
    error_message = "alerts.ingress_5xx_ratio must be strictly between 0 and 1."
  }

  validation {
    condition     = var.alerts.ingress_5xx_window_s >= 60 && var.alerts.ingress_5xx_window_s % 60 == 0
    error_message = "alerts.ingress_5xx_window_s must be a whole number of minutes (60, 120, ...)."
  }
}

variable "app_settings" {
  description = "Settings of the loaded apps (each declared with shared.api.Setting; `hookledger config` lists them), NAME = value, given to every function as environment variables and checked when it starts. Values are strings: a bool is true or false, a list comma-separated. A name app_settings.json lists (generated from the apps in apps/ by `make requirements`) is checked here against its type and choices, and refused if secret (its value would be kept in Terraform state); any other name, such as a setting of an app from outside this repository, is passed unchecked. Names the core sets itself (app_settings.json `reserved`, e.g. from `settings` or `review`) are refused."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for name in keys(var.app_settings) : can(regex("^[A-Z][A-Z0-9_]{1,63}$", name))])
    error_message = "app_settings names must be environment variable names matching ^[A-Z][A-Z0-9_]{1,63}$ (as shared.api.Setting requires), not: ${join(", ", [for name in keys(var.app_settings) : jsonencode(name) if !can(regex("^[A-Z][A-Z0-9_]{1,63}$", name))])}."
  }

  validation {
    # Cloud Run functions set these itself and refuse them in a function's environment.
    condition     = alltrue([for name in keys(var.app_settings) : !contains(["FUNCTION_SIGNATURE_TYPE", "FUNCTION_TARGET", "K_CONFIGURATION", "K_REVISION", "K_SERVICE", "PORT"], name) && !startswith(name, "X_GOOGLE_")])
    error_message = "app_settings cannot set ${join(", ", [for name in keys(var.app_settings) : name if contains(["FUNCTION_SIGNATURE_TYPE", "FUNCTION_TARGET", "K_CONFIGURATION", "K_REVISION", "K_SERVICE", "PORT"], name) || startswith(name, "X_GOOGLE_")])}: Cloud Run functions reserves it."
  }

  # The catalogue is read from the working directory, terraform/ (the root module): before
  # Terraform 1.9 a validation may refer to nothing but its variable, so not path.module.
  validation {
    condition     = length(setintersection(keys(var.app_settings), jsondecode(file("app_settings.json")).reserved)) == 0
    error_message = "app_settings cannot set ${join(", ", sort(setintersection(keys(var.app_settings), jsondecode(file("app_settings.json")).reserved)))}: Terraform sets it from its own variables (settings, review, ...: README.md \"Variables\") or from Secret Manager."
  }

  validation {
    condition     = alltrue([for name in keys(var.app_settings) : !try(jsondecode(file("app_settings.json")).settings[name].secret, false)])
    error_message = "app_settings cannot pass ${join(", ", [for name in keys(var.app_settings) : name if try(jsondecode(file("app_settings.json")).settings[name].secret, false)])}: a secret setting's value would be kept in Terraform state and shown in the functions' configuration."
  }

  validation {
    # The generator turns each setting's type and choices into the pattern of the values
    # shared.apps.Setting accepts (stripped, as it strips them); unknown names pass.
    condition     = alltrue([for name, value in var.app_settings : can(regex(try(jsondecode(file("app_settings.json")).settings[name].pattern, ""), trimspace(value)))])
    error_message = "app_settings: ${join("; ", [for name, value in var.app_settings : "${name} (app ${jsondecode(file("app_settings.json")).settings[name].app}) must be ${jsondecode(file("app_settings.json")).settings[name].expects}, got ${jsonencode(value)}" if !can(regex(try(jsondecode(file("app_settings.json")).settings[name].pattern, ""), trimspace(value)))])}."
  }
}

variable "apps" {
  description = "The apps every function loads (HOOKLEDGER_APPS), as Python module names, e.g. [\"apps.review\", \"apps.articles\", \"apps.classify\"]. An app of this repository, apps.<name>, ships in the functions' archive (apps/__init__.py and apps/<name>/**/*.py). Any other module is not zipped: it must be installed, so add its distribution to pyproject.toml's [project].dependencies and run `make requirements` (functions/requirements.txt), and its settings are not checked by app_settings."
  type        = list(string)
  default     = ["apps.review"]

  validation {
    condition     = length(var.apps) >= 1
    error_message = "apps must name at least one app module (the default is [\"apps.review\"])."
  }

  validation {
    # shared.apps refuses the same names when the functions start; here it fails at plan.
    condition     = alltrue([for module in var.apps : can(regex("^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$", module))])
    error_message = "apps entries must be dotted Python module names such as apps.review, not: ${join(", ", [for module in var.apps : jsonencode(module) if !can(regex("^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$", module))])}."
  }

  validation {
    condition     = length(distinct(var.apps)) == length(var.apps)
    error_message = "apps names a module twice: ${join(", ", distinct([for module in var.apps : module if length([for other in var.apps : other if other == module]) > 1]))}."
  }

  validation {
    # apps/ is the folder of the apps, not one of them.
    condition     = !contains(var.apps, "apps")
    error_message = "apps names \"apps\": name an app of apps/ as apps.<name>, e.g. apps.review."
  }

  validation {
    # Relative to the working directory, terraform/ (no path.module before Terraform 1.9).
    condition     = alltrue([for module in var.apps : startswith(module, "apps.") ? fileexists("../apps/${split(".", module)[1]}/__init__.py") : true])
    error_message = "apps names ${join(", ", [for module in var.apps : module if(startswith(module, "apps.") ? !fileexists("../apps/${split(".", module)[1]}/__init__.py") : false)])}, but apps/ has no such package (no apps/<name>/__init__.py)."
  }
}

variable "enable_apis" {
  description = "Enable the Google APIs hookledger uses. Set false when the project's APIs are managed elsewhere."
  type        = bool
  default     = true
}

variable "firestore" {
  description = "The Firestore databases, both Native mode: `(default)` holds the ledger and `<name_prefix>-claims` the payloads over 512 KiB (the only one the public ingress may reach). Location (null = `region`), point-in-time recovery and delete protection apply to both."
  type = object({
    delete_protection      = optional(bool, true)
    location               = optional(string)
    point_in_time_recovery = optional(bool, true)
  })
  default = {}

  validation {
    condition     = var.firestore.location == null || can(regex("^[a-z0-9-]+$", var.firestore.location))
    error_message = "firestore.location must be a Firestore location id such as nam5 or us-central1."
  }
}

variable "github_app_id" {
  description = "The GitHub App hookledger runs as: its client id (recommended) or app id, the iss of its JWT (GITHUB_APP_ID). Set, it also creates the GITHUB_APP_PRIVATE_KEY secret for the worker and reconcile; empty: no App (GITHUB_TOKEN alone)."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]*$", var.github_app_id))
    error_message = "github_app_id must be the App's client id (e.g. Iv23li...) or numeric app id."
  }
}

variable "github_sweep" {
  description = "The Cloud Scheduler job calling reconcile's /github-deliveries route, the sweep that recovers GitHub App deliveries that failed (GitHub never retries; it keeps them 3 days). Created only with github_app_id: cron schedule, time zone and attempt deadline in seconds (above settings.github_sweep_budget_s)."
  type = object({
    schedule           = optional(string, "*/5 * * * *")
    time_zone          = optional(string, "Etc/UTC")
    attempt_deadline_s = optional(number, 180)
  })
  default = {}

  validation {
    condition     = length(split(" ", trimspace(var.github_sweep.schedule))) == 5
    error_message = "github_sweep.schedule must be a five-field cron expression such as \"*/5 * * * *\"."
  }

  validation {
    condition     = var.github_sweep.attempt_deadline_s >= 15 && var.github_sweep.attempt_deadline_s <= 1800
    error_message = "github_sweep.attempt_deadline_s must be 15-1800 (Cloud Scheduler's limits for HTTP targets)."
  }
}

variable "github_token_enabled" {
  description = "Create a GITHUB_TOKEN secret for the GitHub Contents and commit-comments APIs and give it to the worker and reconcile (needed for private repositories, higher rate limits and review.github_comments)."
  type        = bool
  default     = false
}

variable "ingress_function" {
  description = "Sizing of the public ingress function: memory, CPU, timeout, requests per instance and instance bounds."
  type = object({
    concurrency     = optional(number, 8)
    cpu             = optional(string, "1")
    max_instances   = optional(number, 20)
    memory          = optional(string, "1Gi")
    min_instances   = optional(number, 0)
    timeout_seconds = optional(number, 60)
  })
  default = {}

  validation {
    condition     = can(regex("^[0-9]+(M|Mi|G|Gi)$", var.ingress_function.memory))
    error_message = "ingress_function.memory must look like 512Mi or 1Gi."
  }

  validation {
    condition     = var.ingress_function.concurrency >= 1 && var.ingress_function.concurrency <= 1000 && (var.ingress_function.concurrency == 1 || tonumber(var.ingress_function.cpu) >= 1)
    error_message = "ingress_function.concurrency must be 1-1000, and above 1 needs cpu >= 1."
  }

  validation {
    condition     = var.ingress_function.timeout_seconds >= 1 && var.ingress_function.timeout_seconds <= 3600
    error_message = "ingress_function.timeout_seconds must be 1-3600."
  }

  validation {
    condition     = var.ingress_function.min_instances >= 0 && var.ingress_function.max_instances >= max(1, var.ingress_function.min_instances)
    error_message = "ingress_function needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
}

variable "labels" {
  description = "Labels added to every resource that supports them."
  type        = map(string)
  default     = { app = "hookledger" }
}

variable "name_prefix" {
  description = "Prefix of every resource name (functions, service accounts, secrets, bucket, metrics, the `<name_prefix>-claims` Firestore database)."
  type        = string
  default     = "hookledger"

  validation {
    # Service account ids are 6-30 characters; the longest suffix used is "-scheduler" (10).
    condition     = can(regex("^[a-z][a-z0-9-]{2,18}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 4-20 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "notification_channels" {
  description = "Ids of existing Cloud Monitoring notification channels (projects/P/notificationChannels/N) the alert policies notify."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[0-9]+$", c))])
    error_message = "Each notification channel must be a full id: projects/PROJECT/notificationChannels/NUMBER."
  }
}

variable "project_id" {
  description = "The Google Cloud project to deploy into (must exist, billing enabled)."
  type        = string

  validation {
    # A domain-scoped id (example.com:p) would break the deterministic function URLs.
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id)) && !startswith(var.project_id, "demo-")
    error_message = "project_id must be a plain project id (6-30 lowercase letters, digits, hyphens) and not a demo- (emulator-only) project."
  }
}

# The rate limits are chosen from the capacity model (docs/performance.md "Scale", bench/capacity.py):
# shared, a push is about one dispatch, so 100 pushes/s is ~100/s; 500/s (Cloud Tasks' most
# per queue) leaves 5x headroom, so no setting here binds before Cloud Tasks' own limit, and
# drains a 1,000/s minute in ~80 s. In flight: 500/s x worker_request_seconds (2) = 1,000,
# which the worker's sizing holds (tasks.tf checks it).
variable "queue" {
  description = "The Cloud Tasks queue feeding the worker: name, retry policy (attempts, backoff, doublings) and dispatch rate limits."
  type = object({
    max_attempts              = optional(number, 30)
    max_backoff               = optional(string, "600s")
    max_concurrent_dispatches = optional(number, 1000)
    max_dispatches_per_second = optional(number, 500)
    max_doublings             = optional(number, 6)
    min_backoff               = optional(string, "2s")
    name                      = optional(string, "hookledger-deliveries")
  })
  default = {}

  validation {
    condition     = can(regex("^[A-Za-z0-9-]{1,100}$", var.queue.name))
    error_message = "queue.name must be 1-100 letters, digits or hyphens."
  }

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?s$", var.queue.min_backoff)) && can(regex("^[0-9]+(\\.[0-9]+)?s$", var.queue.max_backoff))
    error_message = "queue.min_backoff and queue.max_backoff are durations in seconds such as \"2s\" or \"600s\"."
  }

  validation {
    condition     = var.queue.max_attempts == -1 || var.queue.max_attempts >= 1
    error_message = "queue.max_attempts must be -1 (unlimited) or at least 1."
  }

  validation {
    condition     = var.queue.max_doublings >= 0 && var.queue.max_dispatches_per_second > 0 && var.queue.max_concurrent_dispatches >= 1
    error_message = "queue.max_doublings must be >= 0, max_dispatches_per_second > 0 and max_concurrent_dispatches >= 1."
  }
}

variable "reconcile_function" {
  description = "Sizing of the private reconcile function: memory, CPU, timeout (must exceed settings.reconcile_budget_s), requests per instance and instance bounds."
  type = object({
    concurrency     = optional(number, 1)
    cpu             = optional(string, "1")
    max_instances   = optional(number, 2)
    memory          = optional(string, "512Mi")
    min_instances   = optional(number, 0)
    timeout_seconds = optional(number, 300)
  })
  default = {}

  validation {
    condition     = can(regex("^[0-9]+(M|Mi|G|Gi)$", var.reconcile_function.memory))
    error_message = "reconcile_function.memory must look like 512Mi or 1Gi."
  }

  validation {
    condition     = var.reconcile_function.concurrency >= 1 && var.reconcile_function.concurrency <= 1000 && (var.reconcile_function.concurrency == 1 || tonumber(var.reconcile_function.cpu) >= 1)
    error_message = "reconcile_function.concurrency must be 1-1000, and above 1 needs cpu >= 1."
  }

  validation {
    condition     = var.reconcile_function.timeout_seconds >= 1 && var.reconcile_function.timeout_seconds <= 3600
    error_message = "reconcile_function.timeout_seconds must be 1-3600."
  }

  validation {
    condition     = var.reconcile_function.min_instances >= 0 && var.reconcile_function.max_instances >= max(1, var.reconcile_function.min_instances)
    error_message = "reconcile_function needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
}

variable "region" {
  description = "Region of the functions, the queue and the scheduler job (also TASKS_LOCATION)."
  type        = string
  default     = "us-central1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as us-central1."
  }
}

variable "review" {
  description = "The reference review pipeline: the repository path whose Markdown files are reviewed (empty = whole repository), the Gemini model, whether each settled review is published as one GitHub commit comment (needs github_token_enabled), whether it is shown as the check run \"hookledger review\" (only with github_app_id: only a GitHub App can write check runs), and the console's base URL that check run links to (empty: no link; no console is deployed)."
  type = object({
    console_url       = optional(string, "")
    github_check_runs = optional(bool, true)
    github_comments   = optional(bool, false)
    model             = optional(string, "models/gemini-2.5-flash")
    path              = optional(string, "")
    repositories      = optional(list(string), [])
  })
  default = {}

  validation {
    condition     = startswith(var.review.model, "models/")
    error_message = "review.model must be a full model name such as models/gemini-2.5-flash."
  }
}

variable "runtime" {
  description = "Python runtime of the three functions (3.11 or later)."
  type        = string
  default     = "python312"

  validation {
    condition     = contains(["python311", "python312", "python313"], var.runtime)
    error_message = "runtime must be python311, python312 or python313."
  }
}

variable "scheduler" {
  description = "The Cloud Scheduler job calling reconcile: cron schedule, time zone and attempt deadline in seconds."
  type = object({
    attempt_deadline_s = optional(number, 320)
    schedule           = optional(string, "*/5 * * * *")
    time_zone          = optional(string, "Etc/UTC")
  })
  default = {}

  validation {
    condition     = length(split(" ", trimspace(var.scheduler.schedule))) == 5
    error_message = "scheduler.schedule must be a five-field cron expression such as \"*/5 * * * *\"."
  }

  validation {
    condition     = var.scheduler.attempt_deadline_s >= 15 && var.scheduler.attempt_deadline_s <= 1800
    error_message = "scheduler.attempt_deadline_s must be 15-1800 (Cloud Scheduler's limits for HTTP targets)."
  }
}


# Each default here restates Config's (shared/config.py), the one source; the table in
# tests/terraform/test_terraform_wiring.py (TERRAFORM_SETTINGS) fails on a drift.
variable "settings" {
  description = "Application settings passed to the functions as environment variables (names in shared/config.py); defaults match the code's."
  type = object({
    # Empty here (Gemini dynamic webhooks off) unlike the code's default (Google's JWKS):
    # turning them on needs gemini_webhook_audience too, or the ingress refuses to start.
    gemini_jwks_url            = optional(string, "")
    gemini_webhook_audience    = optional(string, "")
    gemini_webhook_issuer      = optional(string, "")
    github_api_version         = optional(string, "")
    max_body_bytes             = optional(number, 26214400)
    max_gemini_body_bytes      = optional(number, 65536)
    reconcile_backoff_cap_s    = optional(number, 1800)
    reconcile_backoff_first_s  = optional(number, 30)
    reconcile_backoff_jitter   = optional(number, 0.5)
    reconcile_budget_s         = optional(number, 240)
    reconcile_concurrency      = optional(number, 8)
    reconcile_fanout_threshold = optional(number, 500)
    reconcile_grace_s          = optional(number, 90)
    github_sweep_grace_s       = optional(number, 120)
    github_sweep_budget_s      = optional(number, 120)
    github_sweep_full_pages    = optional(number, 10)
    retention_days             = optional(number, 14)
    signature_tolerance_s      = optional(number, 300)
    stuck_after_s              = optional(number, 21600)
    # Below worker_function.timeout_seconds (540 by default), within Cloud Tasks' 15-1800 s.
    task_dispatch_deadline_s = optional(number, 480)
    worker_max_retries       = optional(number, 20)
  })
  default = {}

  validation {
    # Cloud Functions rejects HTTP requests over 32 MiB before the code sees them.
    condition     = var.settings.max_body_bytes >= 1 && var.settings.max_body_bytes <= 33554432
    error_message = "settings.max_body_bytes must be 1-33554432 (32 MiB, the Cloud Functions request limit)."
  }

  validation {
    condition = (
      var.settings.reconcile_backoff_first_s > 0 &&
      var.settings.reconcile_backoff_cap_s >= var.settings.reconcile_backoff_first_s &&
      var.settings.reconcile_backoff_jitter >= 0 && var.settings.reconcile_backoff_jitter <= 1
    )
    error_message = "settings: reconcile_backoff_first_s > 0, reconcile_backoff_cap_s >= reconcile_backoff_first_s, 0 <= reconcile_backoff_jitter <= 1."
  }

  validation {
    condition     = var.settings.github_api_version == "" || can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", var.settings.github_api_version))
    error_message = "settings.github_api_version must be empty (the version hookledger is written for) or a GitHub REST API version, a date such as \"2022-11-28\"."
  }

  validation {
    condition     = var.settings.gemini_jwks_url == "" || startswith(var.settings.gemini_jwks_url, "https://")
    error_message = "settings.gemini_jwks_url must be empty or an https:// URL."
  }

  validation {
    condition     = var.settings.gemini_jwks_url == "" || trimspace(var.settings.gemini_webhook_audience) != ""
    error_message = "settings.gemini_webhook_audience (the aud of Gemini's dynamic-webhook JWTs) must be set when settings.gemini_jwks_url is."
  }

  validation {
    condition = alltrue([
      for v in [
        var.settings.reconcile_budget_s, var.settings.reconcile_concurrency,
        var.settings.reconcile_fanout_threshold, var.settings.retention_days, var.settings.stuck_after_s,
        var.settings.github_sweep_budget_s,
      ] : v >= 1 && floor(v) == v
    ]) && var.settings.reconcile_grace_s >= 0 && var.settings.github_sweep_grace_s >= 0 && var.settings.signature_tolerance_s >= 1 && var.settings.worker_max_retries >= 0 && var.settings.github_sweep_full_pages >= 0 && floor(var.settings.github_sweep_full_pages) == var.settings.github_sweep_full_pages
    error_message = "settings: budgets, concurrency, thresholds and retention are whole numbers >= 1; grace, tolerance and retries are >= 0; github_sweep_full_pages is a whole number >= 0."
  }

  validation {
    # Cloud Tasks' documented range for an HTTP task's dispatch deadline.
    condition     = var.settings.task_dispatch_deadline_s >= 15 && var.settings.task_dispatch_deadline_s <= 1800 && floor(var.settings.task_dispatch_deadline_s) == var.settings.task_dispatch_deadline_s
    error_message = "settings.task_dispatch_deadline_s must be a whole number of seconds from 15 to 1800."
  }
}

# TRACE_SAMPLE_RATIO restates Config's default (tests/terraform/test_terraform_wiring.py).
variable "trace_sample_ratio" {
  description = "Share of traces the functions keep and export (TRACE_SAMPLE_RATIO, 0-1; sampled on the trace id, so every function keeps the same traces). A function's run that fails or records a dead delivery exports its own spans whatever the ratio."
  type        = number
  default     = 0.1

  validation {
    condition     = var.trace_sample_ratio >= 0 && var.trace_sample_ratio <= 1
    error_message = "trace_sample_ratio must be a fraction from 0 to 1."
  }
}

variable "tracing" {
  description = "Where the functions send their spans (TRACING): \"cloudtrace\" (Cloud Trace; each function's account gets roles/cloudtrace.agent) or \"off\" (no spans, no trace grant). The code's third mode, \"file\", is refused: a function's filesystem is in memory and lost with its instance."
  type        = string
  default     = "cloudtrace"

  validation {
    condition     = contains(["off", "cloudtrace"], var.tracing)
    error_message = "tracing must be \"off\" or \"cloudtrace\" (\"file\" is local-only: a deployed function's filesystem does not outlive its instance)."
  }
}

# max_instances x concurrency (125 x 8 = 1,000 requests in flight) holds the queue's 500
# dispatches/s x worker_request_seconds (docs/performance.md "Scale", bench/capacity.py); a
# ceiling, not a cost: instances start only with load (min_instances 0).
variable "worker_function" {
  description = "Sizing of the private worker function: memory, CPU, timeout, requests per instance and instance bounds."
  type = object({
    concurrency     = optional(number, 8)
    cpu             = optional(string, "1")
    max_instances   = optional(number, 125)
    memory          = optional(string, "1Gi")
    min_instances   = optional(number, 0)
    timeout_seconds = optional(number, 540)
  })
  default = {}

  validation {
    condition     = can(regex("^[0-9]+(M|Mi|G|Gi)$", var.worker_function.memory))
    error_message = "worker_function.memory must look like 512Mi or 1Gi."
  }

  validation {
    condition     = var.worker_function.concurrency >= 1 && var.worker_function.concurrency <= 1000 && (var.worker_function.concurrency == 1 || tonumber(var.worker_function.cpu) >= 1)
    error_message = "worker_function.concurrency must be 1-1000, and above 1 needs cpu >= 1."
  }

  validation {
    # Cloud Tasks waits at most 30 minutes for an HTTP target.
    condition     = var.worker_function.timeout_seconds >= 1 && var.worker_function.timeout_seconds <= 1800
    error_message = "worker_function.timeout_seconds must be 1-1800 (Cloud Tasks' dispatch deadline limit)."
  }

  validation {
    condition     = var.worker_function.min_instances >= 0 && var.worker_function.max_instances >= max(1, var.worker_function.min_instances)
    error_message = "worker_function needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
}

# What one worker request takes, for the plan-time check in tasks.tf (queue rate x this <=
# worker requests in flight). bench/capacity.py models ~1.3 s from bench.cost's calls per
# request and its stated latencies (docs/performance.md "Scale"); 2 rounds it up. Measure yours (Cloud
# Run request latency) and set it.
variable "worker_request_seconds" {
  description = "Planning figure: seconds one worker request takes in this deployment; the queue's max_dispatches_per_second times this must fit worker_function.max_instances x concurrency."
  type        = number
  default     = 2

  validation {
    condition     = var.worker_request_seconds > 0
    error_message = "worker_request_seconds must be positive."
  }
}
