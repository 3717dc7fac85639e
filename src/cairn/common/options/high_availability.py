"""High-availability options (Flink's ``high-availability.*`` keys where they exist).

Invariant: every key here is registered on import; with ``high-availability.type`` NONE
(the default) none of the others has any effect. ``high-availability.cluster-id`` (the job's
identity) is a recovery option (``recovery.py``): it names a job with or without HA.
"""

from __future__ import annotations

from cairn.common.options.define import MS, at_least, define, filesystem_url, spellings

HA_TYPE = define(
    "high-availability.type",
    "enum",
    "NONE",
    "NONE, or STORAGE: one leader per job through a lease with a fencing token in "
    "high-availability.storageDir (a local directory, s3://, gs:// or abfs:// URL). A second "
    "driver of the same job stands by and takes over when the leader's lease lapses, "
    "resuming from the latest completed checkpoint recorded there.",
    "high-availability",
    choices=spellings(("NONE", "none", "off"), ("STORAGE", "filesystem", "lease")),
)
HA_STORAGE_DIR = define(
    "high-availability.storageDir",
    "str",
    None,
    "Where the leader lease and the pointer to the latest completed checkpoint live "
    "(<storageDir>/<job-id>/). Unset: <checkpoint storage>/_ha. S3, GCS and Azure need "
    "conditional writes (If-None-Match/If-Match, ifGenerationMatch), checked at start.",
    "high-availability.storage-dir",
    check=filesystem_url,
)
HA_LEASE_DURATION = define(
    "high-availability.lease-duration",
    "duration",
    6_000,
    "How long a leader's lease lasts without renewal: a standby takes over at most this long "
    "(plus one poll) after the leader stopped renewing, and a leader that could not renew "
    "stops completing checkpoints and committing before then. Flink's Kubernetes leader "
    "election uses 15 s, paced by the API server; one conditional write per renewal on a file "
    "or S3 allows less, and a takeover within 10 s needs it.",
    check=at_least(500, "high-availability.lease-duration", MS),
)
HA_RENEW_INTERVAL = define(
    "high-availability.lease-renew-interval",
    "duration",
    2_000,
    "How often the leader renews its lease (at most half the lease duration): a third of it "
    "by default, so two renewals in a row may fail before the lease lapses (Flink's "
    "Kubernetes retry period is 5 s for a 15 s lease).",
    check=at_least(50, "high-availability.lease-renew-interval", MS),
)
