resource "google_cloud_scheduler_job" "reconcile" {
  project          = var.project_id
  region           = var.region
  name             = "${var.name_prefix}-reconcile"
  description      = "Calls reconcile, which settles the operations whose webhook was lost."
  schedule         = var.scheduler.schedule
  time_zone        = var.scheduler.time_zone
  attempt_deadline = "${var.scheduler.attempt_deadline_s}s"

  # The next scheduled run is the retry: reconcile resumes where the last run stopped.
  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = local.function_urls.reconcile

    oidc_token {
      service_account_email = google_service_account.scheduler_invoker.email
      audience              = local.function_urls.reconcile
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.scheduler_invoke_reconcile]
}

# The GitHub delivery sweep (shared/recovery): the same function and invoker as reconcile,
# another route, its own schedule. Only a GitHub App's deliveries can be listed, with the
# App's JWT, which reconcile already holds: nothing new is granted.
resource "google_cloud_scheduler_job" "github_sweep" {
  count            = var.github_app_id == "" ? 0 : 1
  project          = var.project_id
  region           = var.region
  name             = "${var.name_prefix}-github-sweep"
  description      = "Calls reconcile's /github-deliveries route, which recovers GitHub App deliveries that failed."
  schedule         = var.github_sweep.schedule
  time_zone        = var.github_sweep.time_zone
  attempt_deadline = "${var.github_sweep.attempt_deadline_s}s"

  # The next scheduled run is the retry: the sweep resumes from its checkpoint.
  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = "${trimsuffix(local.function_urls.reconcile, "/")}/github-deliveries"

    oidc_token {
      service_account_email = google_service_account.scheduler_invoker.email
      audience              = local.function_urls.reconcile
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.scheduler_invoke_reconcile]
}

resource "google_cloud_run_v2_service_iam_member" "scheduler_invoke_reconcile" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.function["reconcile"].service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.scheduler_invoker.member
}
