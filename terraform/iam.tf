# One identity per caller, each granted only what it calls. Resource-scoped grants live next
# to their resource (tasks.tf, scheduler.tf, secrets.tf, functions.tf); project-wide ones here.

resource "google_service_account" "function" {
  for_each = local.functions

  project      = var.project_id
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "hookledger ${each.key} function"
  description  = "Runtime identity of the ${each.key} function."

  depends_on = [google_project_service.api]
}

resource "google_service_account" "tasks_invoker" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-tasks"
  display_name = "hookledger Cloud Tasks invoker"
  description  = "Cloud Tasks signs the worker's OIDC tokens as this account; it may invoke the worker only."

  depends_on = [google_project_service.api]
}

resource "google_service_account" "scheduler_invoker" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-scheduler"
  display_name = "hookledger Cloud Scheduler invoker"
  description  = "Cloud Scheduler signs reconcile's OIDC tokens as this account; it may invoke reconcile only."

  depends_on = [google_project_service.api]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "hookledger function builds"
  description  = "Cloud Build runs the functions' builds as this account instead of a default, broader one."

  depends_on = [google_project_service.api]
}

locals {
  # Which Firestore database each function's account may use, one grant per pair. The public
  # ingress only writes stored payloads; the worker reads them back and keeps the
  # ledger; reconcile keeps the ledger and seals check pages, which go by claim check over
  # 512 KiB. Written out (not computed) so checkov and the tests see every grant.
  firestore_grants = {
    ingress-claims   = { function = "ingress", database = "claims" }
    worker-main      = { function = "worker", database = "main" }
    worker-claims    = { function = "worker", database = "claims" }
    reconcile-main   = { function = "reconcile", database = "main" }
    reconcile-claims = { function = "reconcile", database = "claims" }
  }
}

# Firestore grants only exist at project level; the condition narrows each to one database:
# its resource name, or a name under it ("/" keeps hookledger-claims2 out).
resource "google_project_iam_member" "firestore_user" {
  for_each = local.firestore_grants

  project = var.project_id
  role    = "roles/datastore.user"
  member  = google_service_account.function[each.value.function].member

  condition {
    title      = "hookledger-${each.value.database}-database-only"
    expression = "resource.name == \"${local.firestore_database_names[each.value.database]}\" || resource.name.startsWith(\"${local.firestore_database_names[each.value.database]}/\")"
  }
}

# Spans to Cloud Trace (shared/tracing: the exporter calls BatchWriteSpans, which needs
# cloudtrace.traces.patch on the project, per the API reference, "projects.traces.batchWrite").
# roles/cloudtrace.agent is the smallest predefined role holding it: cloudtrace.traces.patch
# and telemetry.traces.write only, no read (cloud.google.com/iam/docs/roles-permissions/cloudtrace;
# cloudtrace.user reads, cloudtrace.admin does everything). It is grantable on a project only
# and Cloud Trace recognises no resource attribute in an IAM condition, so it stays
# unconditional; none at all while var.tracing is "off".
resource "google_project_iam_member" "trace_writer" {
  for_each = var.tracing == "cloudtrace" ? toset(keys(local.functions)) : toset([])

  project = var.project_id
  role    = "roles/cloudtrace.agent"
  member  = google_service_account.function[each.key].member
}

resource "google_project_iam_member" "build_log_writer" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}

# Builds read the uploaded source from our bucket and from the staging copy Cloud Functions makes.
resource "google_project_iam_member" "build_source_reader" {
  project = var.project_id
  role    = "roles/storage.objectViewer"
  member  = google_service_account.build.member

  condition {
    title      = "function-sources-only"
    expression = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.source.name}\") || resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-\")"
  }
}

resource "google_artifact_registry_repository_iam_member" "build_image_writer" {
  project    = var.project_id
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}
