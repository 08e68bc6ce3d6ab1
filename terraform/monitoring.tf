locals {
  # Structured log alerts emitted by shared/ (field `alert` of the JSON log line) => what they mean.
  log_alerts = {
    operation_stuck = {
      display_name = "hookledger: operation stuck"
      runbook      = "An operation stayed pending past STUCK_AFTER_S. It is never closed automatically: find it with `hookledger ops list --json` (status pending) and check the job at Gemini."
    }
    delivery_dead = {
      display_name = "hookledger: delivery dead"
      runbook      = "A delivery failed permanently or ran out of retries. Inspect it with `hookledger deliveries show ID`, fix the cause, then `hookledger deliveries replay ID`."
    }
    batch_superseded = {
      display_name = "hookledger: second batch for one push"
      runbook      = "Overlapping runs of one push made a second Gemini batch; it was recorded superseded and is being cancelled (its outbox). Frequent ones mean attempts outlive their lease: check the worker timeout and TASK_DISPATCH_DEADLINE_S."
    }
    gemini_quota_exhausted = {
      display_name = "hookledger: Gemini quota exhausted"
      runbook      = "Gemini answered 429 for a per-day or spend quota (quota_kind in the log line); checks are deferred as Gemini asks. Raise the quota or the budget in the Google Cloud console."
    }
    operation_gone = {
      display_name = "hookledger: operation gone at Gemini"
      runbook      = "Gemini answered 404 twice for an operation (deleted, or aged out); it was settled failed with reason gone and per-file error reviews. Check who deleted the job."
    }
    operation_waiting = {
      display_name = "hookledger: operation waiting on its caller"
      runbook      = "An interaction needs its caller (requires_action, requires_continuation, idle); hookledger never answers for it. See the waits_for field and act at Gemini."
    }
    outbox_item_failing = {
      display_name = "hookledger: outbox item failing"
      runbook      = "A side effect (a GitHub comment, a batch cancel) keeps failing or was given up (given_up=true). Check the token's access and GitHub's status; `hookledger ops show NAME --json` shows the item's last_error."
    }
    results_unreadable = {
      display_name = "hookledger: batch results unreadable"
      runbook      = "A succeeded batch's results file could not be read before its retention ran out; the batch was settled failed with the reason. Check the Files API and the key's access."
    }
    adoption_incomplete = {
      display_name = "hookledger: orphan batch not adopted (context incomplete)"
      runbook      = "Reconcile found an orphan batch whose kind needs context neither its claim nor the batch tells (e.g. the files of a review still running, claimed before claims carried them); it was not registered and is examined again each run. It is adopted once its rows tell; if it keeps alerting, `hookledger ops list` and the batch's tag name the push."
    }
    gemini_refused_deployment = {
      display_name = "hookledger: Gemini refuses this deployment's batches"
      runbook      = "Gemini refused a shared batch's create for the deployment, not the request: an invalid or expired API key (400 API_KEY_INVALID), 401, billing or permission (403), or a model it does not know (404); reason in the log line. No push has failed: every group waits (30 s, doubling to 10 min) and is created once Gemini accepts. Fix the key, billing, permission or REVIEW_MODEL; only after 24 h held do a group's pushes fail, with this reason. One alert per 30 min for the whole deployment."
    }
    github_recovery_unrecorded = {
      display_name = "hookledger: recovered GitHub delivery never recorded"
      runbook      = "The GitHub delivery sweep handed a failed delivery to the worker, handed it again 15 min later, and 15 min after that the ledger still has no record of it (guid and github_delivery_id in the log line). Check the Cloud Tasks queue (paused, tasks failing) and the worker's logs for that delivery id; `hookledger deliveries recovered` shows the recovery."
    }
    github_delivery_unrecoverable = {
      display_name = "hookledger: GitHub delivery not recovered within 3 days"
      runbook      = "A GitHub App delivery failed and the sweep could not bring it back before GitHub's 3-day window closes (guid, event and repository in the log line). `hookledger deliveries recovered` shows its last_error; while GitHub still keeps it, redeliver it from the App's Advanced settings, or replay the push another way."
    }
    github_sweep_behind = {
      display_name = "hookledger: GitHub delivery sweep behind"
      runbook      = "The GitHub delivery sweep has not finished listing the App's deliveries for over 6 hours (listed_at in the log line), so failed deliveries may leave GitHub's 3 days unrecovered. Check the reconcile function's github-deliveries runs (stopped_at, errors): the App's key, GitHub's rate limit (retry-after), or a budget too small for the deliveries (GITHUB_SWEEP_BUDGET_S)."
    }
    writeback_failed = {
      display_name = "hookledger: write-back failed permanently"
      runbook      = "An operation's write-back failed for good: Firestore refused it (settled with writeback_error and no results), or it failed by its own fault 5 times (settled failed with reason writeback_failed). `hookledger ops show NAME --json` shows the reason."
    }
  }
}

resource "google_logging_metric" "alert" {
  for_each = local.log_alerts

  project     = var.project_id
  name        = "${var.name_prefix}/${each.key}"
  description = "Count of `${each.key}` alert log lines from the hookledger functions."
  filter      = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=~\"^${var.name_prefix}-\" AND jsonPayload.alert=\"${each.key}\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = each.value.display_name
  }

  depends_on = [google_project_service.api]
}

resource "google_monitoring_alert_policy" "log_alert" {
  for_each = local.log_alerts

  project               = var.project_id
  display_name          = each.value.display_name
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "${each.key} logged"

    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.alert[each.key].name}\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  documentation {
    content   = each.value.runbook
    mime_type = "text/markdown"
  }

  alert_strategy {
    auto_close = "86400s"
  }
}

resource "google_monitoring_alert_policy" "ingress_5xx" {
  project               = var.project_id
  display_name          = "hookledger: ingress 5xx rate"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "ingress answers 5xx to more than ${var.alerts.ingress_5xx_ratio * 100}% of requests"

    condition_threshold {
      # 5xx (mostly 503: the hand-off to Cloud Tasks failed) divided by all requests to ingress.
      filter             = "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${google_cloudfunctions2_function.function["ingress"].service_config[0].service}\" AND metric.labels.response_code_class=\"5xx\""
      denominator_filter = "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${google_cloudfunctions2_function.function["ingress"].service_config[0].service}\""
      comparison         = "COMPARISON_GT"
      threshold_value    = var.alerts.ingress_5xx_ratio
      duration           = "0s"

      aggregations {
        alignment_period     = "${var.alerts.ingress_5xx_window_s}s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      denominator_aggregations {
        alignment_period     = "${var.alerts.ingress_5xx_window_s}s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  documentation {
    content   = "ingress is answering 5xx: senders retry (GitHub only on manual redelivery). Check the queue `${var.queue.name}` exists and ingress may enqueue, then the ingress logs."
    mime_type = "text/markdown"
  }

  alert_strategy {
    auto_close = "86400s"
  }
}
