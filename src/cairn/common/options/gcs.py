"""Google Cloud Storage options for ``gs://`` URLs: the ``gs.*`` keys of Flink's GCS plugin,
which hands them to Google's connector as ``fs.gs.*``; turned into gcsfs options only by
``common.storage_options``.

Invariant: every key here is registered on import; unset keys fall back to gcsfs's own
credential chain (``GOOGLE_APPLICATION_CREDENTIALS``, the gcloud login, the metadata server).
"""

from __future__ import annotations

from cairn.common.options.define import define, non_empty, spellings

GS_PROJECT_ID = define(
    "gs.project.id",
    "str",
    None,
    "Google Cloud project of gs:// checkpoint storage (billing, listing); default: the "
    "credentials' project.",
    check=non_empty,
)
GS_AUTH_TYPE = define(
    "gs.auth.type",
    "enum",
    None,
    "How gs:// storage authenticates (the GCS connector's names): APPLICATION_DEFAULT, "
    "SERVICE_ACCOUNT_JSON_KEYFILE (gs.auth.service.account.json.keyfile), COMPUTE_ENGINE "
    "(the metadata server) or UNAUTHENTICATED (an emulator); default: the first that works.",
    choices=spellings(
        ("APPLICATION_DEFAULT", "application_default"),
        ("SERVICE_ACCOUNT_JSON_KEYFILE", "service_account_json_keyfile"),
        ("COMPUTE_ENGINE", "compute_engine"),
        ("UNAUTHENTICATED", "unauthenticated"),
    ),
)
GS_AUTH_KEYFILE = define(
    "gs.auth.service.account.json.keyfile",
    "str",
    None,
    "A service account's JSON key file for gs:// storage (read on every worker); default: "
    "GOOGLE_APPLICATION_CREDENTIALS.",
    "google.cloud.auth.service.account.json.keyfile",
    check=non_empty,
)
GS_STORAGE_ROOT_URL = define(
    "gs.storage.root.url",
    "str",
    None,
    "The GCS JSON API's root URL for gs:// storage (an emulator: http://127.0.0.1:4443); "
    "default: https://storage.googleapis.com, or STORAGE_EMULATOR_HOST.",
    check=non_empty,
)
