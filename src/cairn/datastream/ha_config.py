"""``high-availability.*`` keys → ``HighAvailabilitySettings``.

Invariant: HA is on exactly when ``high-availability.type`` is STORAGE; its storage then
has a URL (``high-availability.storageDir``, else ``_ha`` under the checkpoint storage, the
default one's resolved at submission),
reachable with the same S3 keys as checkpoints, and the lease is renewed at least twice per
lease duration.

>>> from cairn.common import config_options as opts
>>> from cairn.settings import CheckpointSettings
>>> conf = opts.validate_configuration({"high-availability.type": "STORAGE"})
>>> ha_settings_from(conf, CheckpointSettings(storage_url="file:///ckpt")).storage_dir
'file:///ckpt/_ha'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.common import config_options as opts
from cairn.common.exceptions import ConfigurationError
from cairn.common.storage_options import storage_options_for
from cairn.settings import CheckpointSettings, HighAvailabilitySettings

__all__ = ["ha_settings_from"]


def ha_settings_from(
    resolved: Mapping[str, Any], checkpoint: CheckpointSettings
) -> HighAvailabilitySettings:
    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    if get(opts.HA_TYPE) != "STORAGE":
        return HighAvailabilitySettings()
    lease, renew = int(get(opts.HA_LEASE_DURATION)), int(get(opts.HA_RENEW_INTERVAL))
    if renew * 2 > lease:
        raise ConfigurationError(
            f"{opts.HA_RENEW_INTERVAL.key} ({renew} ms) must be at most half of "
            f"{opts.HA_LEASE_DURATION.key} ({lease} ms): a leader renews at least twice per lease"
        )
    url = get(opts.HA_STORAGE_DIR)
    if url is None and checkpoint.storage_url is not None:
        url = checkpoint.storage_url.rstrip("/") + "/_ha"
    # None left: the default checkpoint storage's _ha, resolved when the job is submitted.
    options = storage_options_for(url, resolved) if url else {}
    if not options and _scheme(url or "") == _scheme(checkpoint.storage_url or ""):
        options = dict(checkpoint.storage_options)
    return HighAvailabilitySettings(True, url, options, lease, renew)


def _scheme(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"
