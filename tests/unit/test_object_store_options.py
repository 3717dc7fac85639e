"""Flink's GCS (``gs.*``) and Azure (``fs.azure.*``) keys become gcsfs and adlfs options for
their own schemes only; account keys are secrets in the job's configuration record; storage
errors read as one line in the user's terms."""

from __future__ import annotations

import pytest

from cairn.checkpoint.storage_access import describe_storage_error, is_storage_error
from cairn.common import config_options as opts
from cairn.common.exceptions import ConfigurationError
from cairn.common.storage_options import redact_storage_options, storage_options_for

AZ_KEY = "fs.azure.account.key.acct.blob.core.windows.net"


def test_gs_keys_map_to_gcsfs_for_gs_urls_only() -> None:
    resolved = opts.validate_configuration(
        {
            "gs.project.id": "p",
            "gs.storage.root.url": "http://127.0.0.1:4443/",
            "gs.auth.type": "unauthenticated",
            "s3.access-key": "k",
        }
    )
    assert storage_options_for("gs://b/x", resolved) == {
        "project": "p",
        "endpoint_url": "http://127.0.0.1:4443",
        "token": "anon",
    }
    assert storage_options_for("gcs://b/x", resolved)["token"] == "anon"
    for url in ("s3://b/x", "abfs://c/x", "/tmp/x"):
        assert "project" not in storage_options_for(url, resolved)


def test_gs_key_file_and_its_hadoop_alias() -> None:
    for key in (
        "gs.auth.service.account.json.keyfile",
        "google.cloud.auth.service.account.json.keyfile",
    ):
        resolved = opts.validate_configuration({key: "/k.json"})
        assert storage_options_for("gs://b", resolved) == {"token": "/k.json"}
    resolved = opts.validate_configuration(
        {"gs.auth.type": "APPLICATION_DEFAULT", "gs.auth.service.account.json.keyfile": "/k"}
    )
    assert storage_options_for("gs://b", resolved) == {"token": "google_default"}
    with pytest.raises(ConfigurationError, match=r"gs\.auth\.type"):
        opts.validate_configuration({"gs.auth.type": "password"})


def test_azure_account_comes_from_the_url_else_the_only_key() -> None:
    resolved = opts.validate_configuration({AZ_KEY: "S2V5", "s3.secret-key": "s"})
    hadoop = storage_options_for("abfs://c@acct.dfs.core.windows.net/x", resolved)
    assert hadoop == {"account_name": "acct", "account_key": "S2V5"}
    assert storage_options_for("az://c/x", resolved) == hadoop
    # An account named by the URL without a key: its name only (adlfs's environment decides).
    assert storage_options_for("abfss://c@other.dfs.core.windows.net/x", resolved) == {
        "account_name": "other"
    }
    two = {AZ_KEY: "a", "fs.azure.account.key.b2.dfs.core.windows.net": "b"}
    assert storage_options_for("abfs://c/x", opts.validate_configuration(two)) == {}
    assert storage_options_for("gs://c/x", resolved) == {}


def test_azure_endpoint_makes_a_connection_string() -> None:
    resolved = opts.validate_configuration(
        {AZ_KEY: "S2V5", "fs.azure.blob.endpoint": "http://127.0.0.1:10000/acct/"}
    )
    options = storage_options_for("abfs://c@acct.dfs.core.windows.net/x", resolved)
    assert options["connection_string"] == (
        "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=S2V5;"
        "BlobEndpoint=http://127.0.0.1:10000/acct;"
    )
    assert "S2V5" not in repr(redact_storage_options(options))


def test_account_keys_are_secrets_in_the_configuration_record() -> None:
    from cairn.common import Configuration
    from cairn.datastream import StreamExecutionEnvironment

    assert opts.is_secret(AZ_KEY) and not opts.is_secret("fs.azure.blob.endpoint")
    assert not opts.is_secret("spark.executor.memory")
    configuration = Configuration()
    for k, v in {
        AZ_KEY: "the-account-key",
        "fs.azure.blob.endpoint": "http://127.0.0.1:1/acct",
        "execution.checkpointing.dir": "abfs://c@acct.dfs.core.windows.net/x",
        "spark.app.name": "kept",
    }.items():
        configuration.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.from_collection([1]).print()
    settings = env.prepare_job().settings
    assert settings.configuration[AZ_KEY] == "<redacted>"
    assert settings.configuration["spark.app.name"] == "kept"
    assert "the-account-key" in settings.checkpoint.storage_options["connection_string"]
    assert "the-account-key" not in repr(settings)


def test_errors_of_gcs_and_azure_read_as_one_line() -> None:
    missing = describe_storage_error("gs://b/x", FileNotFoundError("b/b/o"))
    assert missing.startswith("bucket 'b' does not exist")
    denied = describe_storage_error("gs://b/x", PermissionError("403 Forbidden"))
    assert "gs.auth.service.account.json.keyfile" in denied

    class HttpResponseError(Exception):  # the Azure SDK's shape: status, code, long message
        status_code = 403
        error_code = "AuthorizationFailure"

    text = describe_storage_error(
        "abfs://c@acct.dfs.core.windows.net/x",
        HttpResponseError("Server failed to authenticate the request.\nRequestId:1\n<Error/>"),
    )
    assert text.startswith("access denied to container 'c'") and "\n" not in text
    assert "fs.azure.account.key" in text


def test_a_plain_runtime_error_raised_inside_a_storage_client_is_a_storage_error() -> None:
    """hdfs-native raises ``RuntimeError`` for a failed write pipeline (``OperationFailed``):
    raised inside the client it is the storage's error; raised by anything else it is not."""
    client: dict[str, object] = {"__name__": "hdfs_native"}
    failed = "OperationFailed: All nodes failed for write"
    exec(f"def close():\n    raise RuntimeError({failed!r})", client)
    caller = {"__name__": "cairn.checkpoint.hdfs_files", "close": client["close"]}
    exec("def write():\n    close()", caller)
    with pytest.raises(RuntimeError) as raised:
        caller["write"]()  # type: ignore[operator]
    assert is_storage_error(raised.value)
    with pytest.raises(RuntimeError) as ours:
        exec("raise RuntimeError('a bug')", {"__name__": "cairn.runtime.task"})
    assert not is_storage_error(ours.value)
