# Secret VALUES never pass through Terraform (they would land in its state): this file creates
# the containers and the access grants; values are added with `gcloud secrets versions add`
# (README.md "Deploy").
locals {
  # Environment variable name => the secret holding it and the functions that read it.
  secrets = {
    ENVELOPE_KEYS = {
      secret_id = "${var.name_prefix}-envelope-keys"
      readers   = ["ingress", "worker", "reconcile"]
    }
    GEMINI_API_KEY = {
      secret_id = "${var.name_prefix}-gemini-api-key"
      readers   = ["worker", "reconcile"]
    }
    GEMINI_WEBHOOK_SECRETS = {
      secret_id = "${var.name_prefix}-gemini-webhook-secrets"
      readers   = ["ingress"]
    }
    GITHUB_APP_PRIVATE_KEY = {
      secret_id = "${var.name_prefix}-github-app-private-key"
      readers   = ["worker", "reconcile"] # they mint installation tokens; the ingress never
    }
    GITHUB_TOKEN = {
      secret_id = "${var.name_prefix}-github-token"
      readers   = ["worker", "reconcile"] # reconcile's outbox sweep posts review comments
    }
    GITHUB_WEBHOOK_SECRETS = {
      secret_id = "${var.name_prefix}-github-webhook-secrets"
      readers   = ["ingress"]
    }
  }

  # The GitHub token is optional: public repositories can be read without one. The App's
  # private key exists only for an App (github_app_id).
  enabled_secrets = {
    for name, secret in local.secrets : name => secret
    if(name != "GITHUB_TOKEN" || var.github_token_enabled) && (name != "GITHUB_APP_PRIVATE_KEY" || var.github_app_id != "")
  }

  # Function => the secret environment variables it gets; nothing else is readable by it.
  function_secrets = {
    for fn, _ in local.functions : fn => sort([
      for name, secret in local.enabled_secrets : name if contains(secret.readers, fn)
    ])
  }

  secret_grants = merge([
    for name, secret in local.enabled_secrets : {
      for fn in secret.readers : "${name}:${fn}" => { secret = name, function = fn }
    }
  ]...)
}

resource "google_secret_manager_secret" "secret" {
  for_each = local.enabled_secrets

  project   = var.project_id
  secret_id = each.value.secret_id

  replication {
    auto {}
  }

  depends_on = [google_project_service.api]
}

resource "google_secret_manager_secret_iam_member" "reader" {
  for_each = local.secret_grants

  project   = var.project_id
  secret_id = google_secret_manager_secret.secret[each.value.secret].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function[each.value.function].member
}
