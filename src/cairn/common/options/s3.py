"""Object store options (Flink's ``s3.*`` keys), turned into fsspec options for ``s3://``
URLs only by ``common.storage_options``.

Invariant: every key here is registered on import; unset keys fall back to the AWS
environment and credential files.
"""

from __future__ import annotations

from cairn.common.options.define import define, non_empty

S3_ENDPOINT = define(
    "s3.endpoint",
    "str",
    None,
    "S3 endpoint URL for s3:// checkpoint storage (an S3-compatible server: SeaweedFS, MinIO); "
    "default: AWS, or AWS_ENDPOINT_URL.",
    check=non_empty,
)
S3_ACCESS_KEY = define(
    "s3.access-key",
    "str",
    None,
    "S3 access key id; default: AWS_ACCESS_KEY_ID or the AWS credential files.",
    "s3.access.key",
    check=non_empty,
)
S3_SECRET_KEY = define(
    "s3.secret-key",
    "str",
    None,
    "S3 secret access key; default: AWS_SECRET_ACCESS_KEY or the AWS credential files.",
    "s3.secret.key",
    check=non_empty,
)
S3_PATH_STYLE_ACCESS = define(
    "s3.path.style.access",
    "bool",
    False,
    "Address buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint> (S3-compatible "
    "servers on one host need this).",
)
S3_REGION = define(
    "s3.region",
    "str",
    None,
    "S3 region; default: AWS_REGION or the AWS config file.",
    check=non_empty,
)
