"""Azure Blob Storage options for ``abfs://``, ``abfss://`` and ``az://`` URLs: Hadoop's
(and Flink's Azure plugin's) ``fs.azure.account.key.<account>.<host>`` account keys, and the
Blob endpoint of an emulator; turned into adlfs options only by ``common.storage_options``.

Invariant: every key here is registered on import; keys under the account-key prefix are
accepted for any account and are secrets (never kept in a job's configuration record); unset
keys fall back to adlfs's environment (``AZURE_STORAGE_CONNECTION_STRING``, ...).
"""

from __future__ import annotations

from cairn.common.config_registry import register_passthrough_prefix
from cairn.common.options.define import define, non_empty

AZURE_ACCOUNT_KEY_PREFIX = "fs.azure.account.key."
register_passthrough_prefix(
    AZURE_ACCOUNT_KEY_PREFIX,
    "an Azure storage account's key: fs.azure.account.key.<account>.blob.core.windows.net "
    "(or .dfs.core.windows.net)",
    secret=True,
)
AZURE_BLOB_ENDPOINT = define(
    "fs.azure.blob.endpoint",
    "str",
    None,
    "The Blob service endpoint of abfs:// and az:// storage, for an emulator or a private "
    "endpoint (Azurite: http://127.0.0.1:10000/<account>); default: "
    "https://<account>.blob.core.windows.net.",
    check=non_empty,
)
