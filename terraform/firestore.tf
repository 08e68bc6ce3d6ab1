locals {
  # The one definition of the composite indexes and TTL fields, shared with the tests of shared/.
  firestore_spec = jsondecode(file("${path.module}/firestore_indexes.json"))

  firestore_indexes = {
    for index in local.firestore_spec.indexes :
    "${index.collectionGroup}:${join(",", [for f in index.fields : "${f.fieldPath}.${f.order}"])}" => index
  }

  firestore_ttl_fields = {
    for ttl in local.firestore_spec.ttl : "${ttl.collectionGroup}.${ttl.field}" => ttl
  }

  # Fields no query reads through a single-field index (TTL fields excluded: their resource
  # already exempts them, and a field takes one google_firestore_field).
  firestore_unindexed_fields = {
    for pair in flatten([
      for group in local.firestore_spec.unindexed : [
        for field in group.fields : { collectionGroup = group.collectionGroup, field = field }
      ]
    ]) : "${pair.collectionGroup}.${pair.field}" => pair
    if !contains(keys(local.firestore_ttl_fields), "${pair.collectionGroup}.${pair.field}")
  }

  # The payload store's collections (shared/handoff/payloads.py) live in the claims database, the rest
  # (the ledger) in (default).
  claims_collections = ["payloads", "chunks"]

  # IAM conditions match a Firestore database by its resource name, projects/P/databases/D.
  firestore_database_names = {
    main   = "projects/${var.project_id}/databases/${google_firestore_database.main.name}"
    claims = "projects/${var.project_id}/databases/${google_firestore_database.claims.name}"
  }
}

resource "google_firestore_database" "main" {
  # The ledger: the code's default client (it reads no database name for it).
  project     = var.project_id
  name        = "(default)"
  location_id = coalesce(var.firestore.location, var.region)
  type        = "FIRESTORE_NATIVE"
  # Transactions lock as in the emulator the tests run against.
  concurrency_mode                  = "PESSIMISTIC"
  point_in_time_recovery_enablement = var.firestore.point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"
  delete_protection_state           = var.firestore.delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy                   = var.firestore.delete_protection ? "ABANDON" : "DELETE"

  depends_on = [google_project_service.api]
}

# Claim-checked payloads (bodies over 512 KiB) apart from the ledger, so the public ingress's
# account is granted this database and nothing else (iam.tf). Its name is CLAIMS_DATABASE.
resource "google_firestore_database" "claims" {
  project     = var.project_id
  name        = "${var.name_prefix}-claims"
  location_id = google_firestore_database.main.location_id
  type        = google_firestore_database.main.type
  # The ledger's protection: a destroy must not drop bodies the queue has yet to deliver.
  concurrency_mode                  = "PESSIMISTIC"
  point_in_time_recovery_enablement = var.firestore.point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"
  delete_protection_state           = var.firestore.delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy                   = var.firestore.delete_protection ? "ABANDON" : "DELETE"

  depends_on = [google_project_service.api]
}

resource "google_firestore_field" "ttl" {
  for_each = local.firestore_ttl_fields

  project    = var.project_id
  database   = contains(local.claims_collections, each.value.collectionGroup) ? google_firestore_database.claims.name : google_firestore_database.main.name
  collection = each.value.collectionGroup
  field      = each.value.field

  ttl_config {}

  # No query filters on expire_at: skip its single-field indexes (monotonic timestamps hotspot;
  # see google_firestore_field.unindexed).
  index_config {}
}

# Every field no query reads through its single-field index: no single-field indexes at all.
# A collection with a monotonically increasing indexed field (a timestamp) sustains about 500
# writes/s; "If your app doesn't use the timestamp field in any queries, you can remove the 500
# writes per second limit by not indexing the timestamp field"
# (https://cloud.google.com/firestore/docs/solutions/shard-timestamp). Index fanout is also "the
# main contributor to write latency" (https://cloud.google.com/firestore/docs/best-practices).
# Composite indexes do not use these, so a field a composite index lists can still be here.
# tests/integration/test_firestore_exemptions.py derives the list from the queries the code makes.
resource "google_firestore_field" "unindexed" {
  for_each = local.firestore_unindexed_fields

  project    = var.project_id
  database   = contains(local.claims_collections, each.value.collectionGroup) ? google_firestore_database.claims.name : google_firestore_database.main.name
  collection = each.value.collectionGroup
  field      = each.value.field

  index_config {}
}

resource "google_firestore_index" "composite" {
  for_each = local.firestore_indexes

  project     = var.project_id
  database    = google_firestore_database.main.name
  collection  = each.value.collectionGroup
  query_scope = "COLLECTION"

  dynamic "fields" {
    for_each = each.value.fields
    content {
      field_path = fields.value.fieldPath
      order      = fields.value.order
    }
  }
}
