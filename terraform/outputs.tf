output "function_names" {
  description = "The three function names (ingress, worker, reconcile)."
  value       = { for key, fn in google_cloudfunctions2_function.function : key => fn.name }
}

output "function_service_accounts" {
  description = "Runtime service account email of each function."
  value       = { for key, sa in google_service_account.function : key => sa.email }
}

output "gemini_webhook_url" {
  description = "Paste into the Gemini webhook registration (`hookledger webhooks register`)."
  value       = "${google_cloudfunctions2_function.function["ingress"].url}/gemini"
}

output "github_webhook_url" {
  description = "Paste into GitHub: repository Settings > Webhooks > Payload URL (content type application/json)."
  value       = "${google_cloudfunctions2_function.function["ingress"].url}/github"
}

output "ingress_url" {
  description = "Base URL of the public ingress function."
  value       = google_cloudfunctions2_function.function["ingress"].url
}

output "queue_id" {
  description = "Full id of the Cloud Tasks queue (projects/P/locations/L/queues/Q)."
  value       = google_cloud_tasks_queue.deliveries.id
}

output "queue_name" {
  description = "Short name of the Cloud Tasks queue (TASKS_QUEUE)."
  value       = google_cloud_tasks_queue.deliveries.name
}

output "reconcile_url" {
  description = "URL of the private reconcile function (the scheduler's OIDC audience)."
  value       = local.function_urls.reconcile
}

output "scheduler_job" {
  description = "Name of the Cloud Scheduler job that calls reconcile."
  value       = google_cloud_scheduler_job.reconcile.name
}

output "secret_ids" {
  description = "Secret Manager secret id for each secret environment variable; add values with `gcloud secrets versions add`."
  value       = { for name, secret in google_secret_manager_secret.secret : name => secret.secret_id }
}

output "source_bucket" {
  description = "Bucket holding the zipped function source."
  value       = google_storage_bucket.source.name
}

output "tasks_service_account" {
  description = "The account Cloud Tasks signs the worker's OIDC tokens as (TASKS_SERVICE_ACCOUNT)."
  value       = google_service_account.tasks_invoker.email
}

output "worker_url" {
  description = "URL of the private worker function (WORKER_URL, the tasks' OIDC audience)."
  value       = local.function_urls.worker
}
