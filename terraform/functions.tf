locals {
  functions = {
    ingress = {
      description = "Public webhook receiver: verifies GitHub and Gemini signatures, enqueues a signed envelope, answers 202."
      # GitHub and Gemini call from the internet.
      ingress_settings = "ALLOW_ALL"
      sizing           = var.ingress_function
    }
    worker = {
      description = "Private: runs each queued delivery (called by Cloud Tasks with an OIDC token)."
      # Cloud Tasks in the same project counts as internal traffic.
      ingress_settings = "ALLOW_INTERNAL_ONLY"
      sizing           = var.worker_function
    }
    reconcile = {
      description = "Private: settles operations whose webhook never came (called by Cloud Scheduler with an OIDC token)."
      # Cloud Scheduler in the same project counts as internal traffic.
      ingress_settings = "ALLOW_INTERNAL_ONLY"
      sizing           = var.reconcile_function
    }
  }

  function_names = { for key, _ in local.functions : key => "${var.name_prefix}-${key}" }

  # A function cannot read its own `url` attribute (a cycle), so every URL is built in the
  # deterministic form Cloud Functions assigns and accepts as the OIDC audience.
  function_urls = {
    for key, name in local.function_names : key => "https://${var.region}-${var.project_id}.cloudfunctions.net/${name}"
  }

  # What a burst of the largest bodies can hold in one ingress instance (see the precondition).
  ingress_memory_bytes = tonumber(regex("^[0-9]+", var.ingress_function.memory)) * lookup(
    { Mi = 1048576, Gi = 1073741824, M = 1000000, G = 1000000000 },
    regex("[A-Za-z]+$", var.ingress_function.memory), 0
  )
  ingress_peak_bytes = (
    var.ingress_function.concurrency * max(var.settings.max_body_bytes, var.settings.max_gemini_body_bytes) * 3 + 134217728
  )

  # The deployment contract with shared/config.py: plain environment per function. Secret
  # environment variables come from local.secrets (secrets.tf).
  function_env = {
    ingress = {
      CLAIMS_DATABASE         = google_firestore_database.claims.name
      GEMINI_JWKS_URL         = var.settings.gemini_jwks_url
      GEMINI_WEBHOOK_AUDIENCE = var.settings.gemini_webhook_audience
      GEMINI_WEBHOOK_ISSUER   = var.settings.gemini_webhook_issuer
      GOOGLE_CLOUD_PROJECT    = var.project_id
      MAX_BODY_BYTES          = tostring(var.settings.max_body_bytes)
      MAX_GEMINI_BODY_BYTES   = tostring(var.settings.max_gemini_body_bytes)
      SIGNATURE_TOLERANCE_S   = tostring(var.settings.signature_tolerance_s)
      # Every task carries the dispatch deadline, which must stay below the worker's timeout.
      TASK_DISPATCH_DEADLINE_S = tostring(var.settings.task_dispatch_deadline_s)
      TASKS_LOCATION           = var.region
      TASKS_QUEUE              = var.queue.name
      TASKS_SERVICE_ACCOUNT    = google_service_account.tasks_invoker.email
      TRACE_SAMPLE_RATIO       = tostring(var.trace_sample_ratio)
      TRACING                  = var.tracing
      WORKER_TIMEOUT_S         = tostring(var.worker_function.timeout_seconds)
      WORKER_URL               = local.function_urls.worker
    }
    # The worker registers operations with the grace and runs reconcile's fanned-out check
    # pages, so it reads the same reconcile settings as reconcile itself.
    worker = {
      CLAIMS_DATABASE = google_firestore_database.claims.name
      CONSOLE_URL     = var.review.console_url
      # Per-job webhooks (webhook_config.uris) are signed as dynamic webhooks (an RS256 JWT):
      # the batches route to the ingress only while it verifies those (gemini_jwks_url).
      GEMINI_WEBHOOK_URIS        = var.settings.gemini_jwks_url == "" ? "" : "${local.function_urls.ingress}/gemini"
      GITHUB_API_VERSION         = var.settings.github_api_version
      GITHUB_APP_ID              = var.github_app_id
      GITHUB_CHECK_RUNS          = tostring(var.review.github_check_runs && var.github_app_id != "")
      GITHUB_COMMENTS            = tostring(var.review.github_comments)
      GITHUB_REPOSITORIES        = join(",", var.review.repositories)
      GOOGLE_CLOUD_PROJECT       = var.project_id
      OIDC_AUDIENCE              = local.function_urls.worker
      RECONCILE_BACKOFF_CAP_S    = tostring(var.settings.reconcile_backoff_cap_s)
      RECONCILE_BACKOFF_FIRST_S  = tostring(var.settings.reconcile_backoff_first_s)
      RECONCILE_BACKOFF_JITTER   = tostring(var.settings.reconcile_backoff_jitter)
      RECONCILE_BUDGET_S         = tostring(var.settings.reconcile_budget_s)
      RECONCILE_CONCURRENCY      = tostring(var.settings.reconcile_concurrency)
      RECONCILE_FANOUT_THRESHOLD = tostring(var.settings.reconcile_fanout_threshold)
      RECONCILE_GRACE_S          = tostring(var.settings.reconcile_grace_s)
      RETENTION_DAYS             = tostring(var.settings.retention_days)
      REVIEW_MODEL               = var.review.model
      REVIEW_PATH                = var.review.path
      STUCK_AFTER_S              = tostring(var.settings.stuck_after_s)
      # The delivery lease lasts the worker's timeout plus the deadline's margin below it.
      TASK_DISPATCH_DEADLINE_S = tostring(var.settings.task_dispatch_deadline_s)
      # Pins the OIDC token's email: only Cloud Tasks' account may call the worker.
      TASKS_SERVICE_ACCOUNT = google_service_account.tasks_invoker.email
      # functions-framework serves with THREADS gunicorn threads (else 4 x os.cpu_count(),
      # whatever the concurrency): one per request an instance is sent at once, as Cloud
      # Functions' concurrency guide asks of Python. Config.worker_concurrency is its default.
      THREADS            = tostring(var.worker_function.concurrency)
      TRACE_SAMPLE_RATIO = tostring(var.trace_sample_ratio)
      TRACING            = var.tracing
      WORKER_MAX_RETRIES = tostring(var.settings.worker_max_retries)
      WORKER_TIMEOUT_S   = tostring(var.worker_function.timeout_seconds)
    }
    reconcile = {
      CLAIMS_DATABASE            = google_firestore_database.claims.name
      CONSOLE_URL                = var.review.console_url
      GITHUB_API_VERSION         = var.settings.github_api_version
      GITHUB_APP_ID              = var.github_app_id
      GITHUB_CHECK_RUNS          = tostring(var.review.github_check_runs && var.github_app_id != "")
      GITHUB_COMMENTS            = tostring(var.review.github_comments)
      GITHUB_SWEEP_BUDGET_S      = tostring(var.settings.github_sweep_budget_s)
      GITHUB_SWEEP_GRACE_S       = tostring(var.settings.github_sweep_grace_s)
      GITHUB_SWEEP_FULL_PAGES    = tostring(var.settings.github_sweep_full_pages)
      GOOGLE_CLOUD_PROJECT       = var.project_id
      OIDC_AUDIENCE              = local.function_urls.reconcile
      RECONCILE_BACKOFF_CAP_S    = tostring(var.settings.reconcile_backoff_cap_s)
      RECONCILE_BACKOFF_FIRST_S  = tostring(var.settings.reconcile_backoff_first_s)
      RECONCILE_BACKOFF_JITTER   = tostring(var.settings.reconcile_backoff_jitter)
      RECONCILE_BUDGET_S         = tostring(var.settings.reconcile_budget_s)
      RECONCILE_CONCURRENCY      = tostring(var.settings.reconcile_concurrency)
      RECONCILE_FANOUT_THRESHOLD = tostring(var.settings.reconcile_fanout_threshold)
      RECONCILE_GRACE_S          = tostring(var.settings.reconcile_grace_s)
      RECONCILE_URL              = local.function_urls.reconcile
      RETENTION_DAYS             = tostring(var.settings.retention_days)
      SCHEDULER_SERVICE_ACCOUNT  = google_service_account.scheduler_invoker.email
      STUCK_AFTER_S              = tostring(var.settings.stuck_after_s)
      TASK_DISPATCH_DEADLINE_S   = tostring(var.settings.task_dispatch_deadline_s)
      TASKS_LOCATION             = var.region
      TASKS_QUEUE                = var.queue.name
      TASKS_SERVICE_ACCOUNT      = google_service_account.tasks_invoker.email
      TRACE_SAMPLE_RATIO         = tostring(var.trace_sample_ratio)
      TRACING                    = var.tracing
      WORKER_TIMEOUT_S           = tostring(var.worker_function.timeout_seconds)
      WORKER_URL                 = local.function_urls.worker
    }
  }

  # Every function loads the same apps and reads their settings when it starts (variables.tf
  # checks app_settings); merged under function_env so the core's own names always win.
  app_env = merge(var.app_settings, { HOOKLEDGER_APPS = join(",", var.apps) })
}

# The source archive, in a block of its own (tests/terraform evaluate it with the CLI).
locals {
  # Only what the functions import: main.py and requirements.txt at the archive root, the
  # shared package beside them, and the packages of the in-repo apps var.apps loads
  # (apps.<name>[.<module>] ships apps/<name>/ whole; any other module comes from
  # requirements.txt). hookledger/ (the CLI and console), local/ (dev-only), tests/ and
  # bench/ are never deployed; tests/terraform checks the archive and the imports.
  repo_root    = abspath("${path.module}/..")
  app_packages = distinct([for module in var.apps : split(".", module)[1] if startswith(module, "apps.")])
  # apps/__init__.py only with an app to ship, and only if present (apps/ may be a namespace package).
  app_files = concat(
    [for f in fileset(local.repo_root, "apps/__init__.py") : f if length(local.app_packages) > 0],
    # An app's own tests (apps/<name>/tests/, run with the test kit) are never shipped.
    flatten([for name in local.app_packages : [for f in fileset("${local.repo_root}/apps/${name}", "**/*.py") : "apps/${name}/${f}" if !startswith(f, "tests/")]]),
  )
  source_files = merge(
    { for f in fileset("${local.repo_root}/functions", "*.py") : f => "${local.repo_root}/functions/${f}" },
    { "requirements.txt" = "${local.repo_root}/functions/requirements.txt" },
    { for f in fileset("${local.repo_root}/shared", "**/*.py") : "shared/${f}" => "${local.repo_root}/shared/${f}" },
    # Data the core reads at run time (GitHub's operation catalog, shared/github/operations.json).
    { for f in fileset("${local.repo_root}/shared", "**/*.json") : "shared/${f}" => "${local.repo_root}/shared/${f}" },
    { for f in local.app_files : f => "${local.repo_root}/${f}" },
  )
  # Hash of names and contents, not of the zip: zip timestamps must not force a redeploy.
  source_hash = sha256(join("\n", [for name in sort(keys(local.source_files)) : "${name} ${filesha256(local.source_files[name])}"]))
}

data "archive_file" "functions_source" {
  type        = "zip"
  output_path = "${path.module}/.build/functions-${substr(local.source_hash, 0, 16)}.zip"

  dynamic "source" {
    for_each = local.source_files
    content {
      content  = file(source.value)
      filename = source.key
    }
  }
}

resource "google_storage_bucket" "source" {
  #checkov:skip=CKV_GCP_62:Holds only build inputs; object reads are recorded by Cloud Audit Logs, a second log bucket adds nothing.
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  versioning {
    enabled = true
  }

  # Old archives are only needed for a rollback; keep the last few.
  lifecycle_rule {
    condition {
      num_newer_versions = 5
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.api]
}

resource "google_storage_bucket_object" "source" {
  # The content hash in the name makes any source change redeploy all three functions.
  name   = "functions-${local.source_hash}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.functions_source.output_path
}

resource "google_artifact_registry_repository" "functions" {
  #checkov:skip=CKV_GCP_84:Holds only images rebuilt from this repository's public source; Google-managed encryption suffices.
  project       = var.project_id
  location      = var.region
  repository_id = "${var.name_prefix}-functions"
  format        = "DOCKER"
  description   = "Images built from the hookledger functions' source."

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 10
    }
  }

  depends_on = [google_project_service.api]
}

resource "google_cloudfunctions2_function" "function" {
  #checkov:skip=CKV_GCP_124:Only ingress allows all traffic (public webhook endpoint); worker and reconcile are internal-only, checked by tests/terraform.
  for_each = local.functions

  project     = var.project_id
  location    = var.region
  name        = local.function_names[each.key]
  description = each.value.description

  build_config {
    runtime           = var.runtime
    entry_point       = each.key
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory                 = each.value.sizing.memory
    available_cpu                    = each.value.sizing.cpu
    timeout_seconds                  = each.value.sizing.timeout_seconds
    max_instance_request_concurrency = each.value.sizing.concurrency
    min_instance_count               = each.value.sizing.min_instances
    max_instance_count               = each.value.sizing.max_instances
    # Network reach per function; who may call is decided by run.invoker grants.
    ingress_settings               = each.value.ingress_settings
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.function[each.key].email
    environment_variables          = merge(local.app_env, local.function_env[each.key])

    dynamic "secret_environment_variables" {
      for_each = local.function_secrets[each.key]
      content {
        key        = secret_environment_variables.value
        project_id = var.project_id
        secret     = google_secret_manager_secret.secret[secret_environment_variables.value].secret_id
        version    = "latest"
      }
    }
  }

  lifecycle {
    precondition {
      # Cloud Tasks must give up on an attempt before the worker's timeout ends it; the
      # delivery lease covers the rest (docs/architecture.md, "Delivery lease").
      condition     = var.settings.task_dispatch_deadline_s < var.worker_function.timeout_seconds
      error_message = "settings.task_dispatch_deadline_s must be below worker_function.timeout_seconds, or the worker refuses to start."
    }
    precondition {
      # Reconcile stops taking work at its budget, waits up to 30 s (DRAIN_S) for checks in
      # flight, then sweeps the outbox on its own 15 s budget (SWEEP_BUDGET_S).
      condition     = var.settings.reconcile_budget_s + 30 + 15 < var.reconcile_function.timeout_seconds
      error_message = "settings.reconcile_budget_s + 45 s (30 s drain, 15 s outbox sweep) must be below reconcile_function.timeout_seconds, or reconcile is killed before it answers."
    }
    precondition {
      # Each in-flight ingress request may hold its body about 3 times (read, joined, sealed)
      # on top of ~128 MiB of runtime: a burst of the largest bodies must not OOM-kill the
      # genuine deliveries in flight (GitHub does not retry).
      condition     = local.ingress_peak_bytes <= local.ingress_memory_bytes
      error_message = "ingress_function.concurrency x the largest body limit (settings.max_body_bytes / max_gemini_body_bytes) x 3 + 128 MiB must fit ingress_function.memory."
    }
  }

  depends_on = [
    google_secret_manager_secret_iam_member.reader,
    google_project_iam_member.build_log_writer,
    google_project_iam_member.build_source_reader,
    google_artifact_registry_repository_iam_member.build_image_writer,
    # A revision that starts tracing finds its account already allowed to write spans.
    google_project_iam_member.trace_writer,
  ]
}

# The only public grant in the deployment: GitHub and Gemini call ingress unauthenticated and
# ingress checks their signatures itself.
resource "google_cloud_run_v2_service_iam_member" "ingress_public" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.function["ingress"].service_config[0].service
  role     = "roles/run.invoker"
  member   = "allUsers"
}
