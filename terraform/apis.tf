locals {
  apis = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtasks.googleapis.com",
    # Enabled whatever var.tracing says: it grants nothing, and turning tracing on later
    # then needs no API switch-on racing the functions' first exports.
    "cloudtrace.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ])
}

resource "google_project_service" "api" {
  for_each = var.enable_apis ? local.apis : toset([])

  project = var.project_id
  service = each.value
  # Other workloads in the project may use the same APIs: never switch them off on destroy.
  disable_on_destroy = false
}
