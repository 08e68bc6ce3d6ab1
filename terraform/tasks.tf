# Who may put tasks on the queue: the two functions that hand work to the worker.
locals {
  enqueuers = toset(["ingress", "reconcile"])
}

resource "google_cloud_tasks_queue" "deliveries" {
  project  = var.project_id
  location = var.region
  name     = var.queue.name

  retry_config {
    max_attempts  = var.queue.max_attempts
    min_backoff   = var.queue.min_backoff
    max_backoff   = var.queue.max_backoff
    max_doublings = var.queue.max_doublings
  }

  rate_limits {
    max_dispatches_per_second = var.queue.max_dispatches_per_second
    max_concurrent_dispatches = var.queue.max_concurrent_dispatches
  }

  stackdriver_logging_config {
    sampling_ratio = 1.0
  }

  lifecycle {
    precondition {
      # The worker records a delivery as dead before Cloud Tasks gives up on it silently.
      condition     = var.queue.max_attempts == -1 || var.settings.worker_max_retries < var.queue.max_attempts
      error_message = "settings.worker_max_retries must be below queue.max_attempts so the worker marks a delivery dead before the queue drops it."
    }
    precondition {
      # Little's law: what the queue may send each second, held for one worker request,
      # must fit the worker's requests in flight, or Cloud Run refuses and tasks back off
      # (docs/performance.md "Scale"; bench/_capacity.py queue_fits_worker is the same rule).
      condition     = var.queue.max_dispatches_per_second * var.worker_request_seconds <= var.worker_function.max_instances * var.worker_function.concurrency
      error_message = "queue.max_dispatches_per_second x worker_request_seconds must not exceed worker_function.max_instances x worker_function.concurrency: the worker cannot absorb that rate."
    }
    precondition {
      # The queue never holds more requests open than the worker can take.
      condition     = var.queue.max_concurrent_dispatches <= var.worker_function.max_instances * var.worker_function.concurrency
      error_message = "queue.max_concurrent_dispatches must not exceed worker_function.max_instances x worker_function.concurrency."
    }
  }

  depends_on = [google_project_service.api]
}

resource "google_cloud_tasks_queue_iam_member" "enqueuer" {
  for_each = local.enqueuers

  project  = var.project_id
  location = google_cloud_tasks_queue.deliveries.location
  name     = google_cloud_tasks_queue.deliveries.name
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function[each.key].member
}

# Creating a task with an OIDC token requires actAs on the token's account: this one account only.
resource "google_service_account_iam_member" "enqueuer_acts_as_tasks_invoker" {
  for_each = local.enqueuers

  service_account_id = google_service_account.tasks_invoker.name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function[each.key].member
}

resource "google_cloud_run_v2_service_iam_member" "tasks_invoke_worker" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.function["worker"].service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.tasks_invoker.member
}
