"""Checkpoint metadata: the one file (``_metadata``) that makes a checkpoint directory complete.

Invariant: the encoded file is a one-line JSON header (format, version, body length, SHA-256,
and with a signing key an HMAC-SHA256) followed by the JSON body, so truncation, corruption
and (with the key) tampering are detected before any field is trusted; every state path inside
is relative to the directory holding the file; decoding never unpickles (inline values stay
bytes), so reading a planted file cannot run code.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.checkpoint.errors import CorruptCheckpointError, UnverifiedCheckpointError
from cairn.checkpoint.handles import (
    AnyKeyedStateHandle,
    InputChannelStateHandle,
    KeyedStateHandle,
    KeyedStateSchema,
    OperatorStateHandle,
    OperatorSubtaskState,
    RocksDBKeyedStateHandle,
    RocksDBStateFile,
    StreamRange,
)
from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus, SubtaskStats
from cairn.ids import CheckpointId, JobId, OperatorUid, SubtaskIndex, VertexId
from cairn.settings import SigningKey

METADATA_FILE_NAME = "_metadata"
METADATA_FORMAT = "cairn-checkpoint-metadata"
METADATA_VERSION = 1


class SignatureStatus(enum.Enum):
    """What reading a ``_metadata`` found out about its signature."""

    UNSIGNED = "unsigned"  # no signature (and no key was given to require one)
    UNCHECKED = "signed, not checked"  # signed, but read without a key
    VERIFIED = "verified"  # signed with the key it was read with


@dataclass(frozen=True, slots=True)
class OperatorMetadata:
    """State of one operator (by uid) across its subtasks; absent subtasks had no state."""

    uid: OperatorUid
    parallelism: int
    max_parallelism: int
    subtasks: Mapping[SubtaskIndex, OperatorSubtaskState] = field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.subtasks.values())


@dataclass(frozen=True, slots=True)
class CheckpointSummaryStats:
    """Totals and maxima over the subtasks' metrics, kept with the checkpoint for listings.

    ``subtasks`` holds every subtask's acknowledgement (ordered by task); it is empty in
    metadata written before Cairn kept per-subtask statistics, so readers must not rely on it.
    """

    state_size: int = 0
    num_subtasks: int = 0
    processed_bytes: int = 0
    persisted_bytes: int = 0
    max_alignment_duration_ms: int = 0
    max_sync_duration_ms: int = 0
    max_async_duration_ms: int = 0
    unaligned: bool = False
    subtasks: tuple[SubtaskStats, ...] = ()

    @property
    def max_start_delay_ms(self) -> int | None:
        """Slowest subtask's start delay; None when no per-subtask rows were kept."""
        if not self.subtasks:
            return None
        return max(s.metrics.start_delay_ms for s in self.subtasks)


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """Everything needed to restore a job from one checkpoint or savepoint.

    >>> md = CheckpointMetadata(JobId("j"), CheckpointId(3), trigger_ms=10, completed_ms=25,
    ...                         max_parallelism=128)
    >>> decode_metadata(encode_metadata(md)) == md, md.duration_ms
    (True, 15)
    """

    job_id: JobId
    checkpoint_id: CheckpointId
    trigger_ms: int
    completed_ms: int
    max_parallelism: int
    operators: Mapping[OperatorUid, OperatorMetadata] = field(default_factory=dict)
    is_savepoint: bool = False
    stats: CheckpointSummaryStats = CheckpointSummaryStats()
    # Job-level facts the job master wants to keep with the checkpoint (e.g. the job name).
    properties: Mapping[str, str] = field(default_factory=dict)
    version: int = METADATA_VERSION

    @property
    def duration_ms(self) -> int:
        return self.completed_ms - self.trigger_ms

    @property
    def state_size(self) -> int:
        return sum(op.state_size for op in self.operators.values())

    @property
    def inline_size(self) -> int:
        """Bytes of pickled inline values (listings show this, never the values)."""
        return sum(s.inline_size for op in self.operators.values() for s in op.subtasks.values())

    @property
    def checkpointed_size(self) -> int:
        """What this checkpoint added: its state size less files it shares with older ones."""
        return sum(
            s.checkpointed_size for op in self.operators.values() for s in op.subtasks.values()
        )

    def with_subtask_stats(self, stats: CheckpointStats | None) -> CheckpointMetadata:
        """A copy that keeps the per-subtask rows of ``stats`` (this checkpoint's statistics).

        >>> md = CheckpointMetadata(JobId("j"), CheckpointId(3), 10, 25, 128)
        >>> md.with_subtask_stats(None) is md
        True
        """
        if stats is None:
            return self
        return replace(self, stats=replace(self.stats, subtasks=stats.subtask_details()))

    def to_checkpoint_stats(self, path: str | None = None) -> CheckpointStats:
        """This completed checkpoint as :class:`CheckpointStats` (from the per-subtask rows).

        Metadata written without per-subtask rows gives a checkpoint without subtasks; use
        :attr:`stats` for its totals then.
        """
        subtasks = {s.task: s for s in self.stats.subtasks}
        return CheckpointStats(
            checkpoint_id=self.checkpoint_id,
            is_savepoint=self.is_savepoint,
            status=CheckpointStatus.COMPLETED,
            trigger_ms=self.trigger_ms,
            num_subtasks=self.stats.num_subtasks or len(subtasks),
            subtasks=subtasks,
            end_ms=self.completed_ms,
            path=path,
        )

    def referenced_files(self) -> dict[str, int]:
        """Relative path of every state file -> the least size it must have (end of its ranges)."""
        needed: dict[str, int] = {}
        for op in self.operators.values():
            for sub in op.subtasks.values():
                for kh in sub.keyed:
                    if isinstance(kh, RocksDBKeyedStateHandle):
                        needed.update((f.path, f.size) for f in kh.files)
                        continue
                    end = max((r.offset + r.length for r in kh.sections.values()), default=0)
                    needed[kh.path] = max(needed.get(kh.path, 0), end)
                for oh in sub.operator:
                    end = oh.section.offset + oh.section.length
                    needed[oh.path] = max(needed.get(oh.path, 0), end)
                ic = sub.input_channels
                if ic is not None:
                    end = max(
                        (r.offset + r.length for rs in ic.buffers.values() for r in rs), default=0
                    )
                    needed[ic.path] = max(needed.get(ic.path, 0), end)
        return needed


@dataclass(frozen=True, slots=True)
class CompletedCheckpoint:
    """Metadata together with the directory it lives in (handles' paths are relative to it)."""

    metadata: CheckpointMetadata
    directory: str

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self.metadata.checkpoint_id

    @property
    def is_savepoint(self) -> bool:
        return self.metadata.is_savepoint

    @property
    def metadata_path(self) -> str:
        return f"{self.directory.rstrip('/')}/{METADATA_FILE_NAME}"


# --- codec ------------------------------------------------------------------------------------


def encode_metadata(metadata: CheckpointMetadata, key: SigningKey | None = None) -> bytes:
    """Serialize to header line + JSON body, signed with ``key`` if given; see
    :func:`decode_metadata`."""
    body = json.dumps(_metadata_to_json(metadata), sort_keys=True, indent=1).encode()
    header: dict[str, Any] = {
        "format": METADATA_FORMAT,
        "version": metadata.version,
        "body_length": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }
    if key is not None:
        header["body_hmac_sha256"] = _mac(key, metadata.version, body)
    return json.dumps(header, sort_keys=True).encode() + b"\n" + body


def decode_metadata(
    data: bytes, source: str = "<metadata>", key: SigningKey | None = None
) -> CheckpointMetadata:
    """Parse bytes written by :func:`encode_metadata`; ``source`` names the file in errors.

    With ``key``, the signature is checked before anything in the body is parsed.

    Raises:
        CorruptCheckpointError: empty, truncated, corrupted, foreign or newer-version data.
        UnverifiedCheckpointError: ``key`` is given and the data is unsigned, or signed with
            another key, or changed since it was signed.
    """
    return decode_metadata_checked(data, source, key)[0]


def decode_metadata_checked(
    data: bytes, source: str = "<metadata>", key: SigningKey | None = None
) -> tuple[CheckpointMetadata, SignatureStatus]:
    """:func:`decode_metadata`, and what it found out about the signature.

    >>> md = CheckpointMetadata(JobId("j"), CheckpointId(3), 10, 25, 128)
    >>> key = SigningKey.parse("a-key-of-16-chars-or-more")
    >>> decode_metadata_checked(encode_metadata(md, key), key=key)[1].value
    'verified'
    >>> decode_metadata_checked(encode_metadata(md), key=key)
    Traceback (most recent call last):
    ...
    cairn.checkpoint.errors.UnverifiedCheckpointError: <metadata>: checkpoint 3 is not signed, ...
    """
    header, body, version = _checked_parts(data, source)
    status = _check_signature(header, body, version, key, source)
    try:
        return _metadata_from_json(json.loads(body), version, source), status
    except CorruptCheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CorruptCheckpointError(source, f"malformed metadata body: {e!r}") from e


def _checked_parts(data: bytes, source: str) -> tuple[dict[str, Any], bytes, int]:
    """The header, the body and the version, once length and SHA-256 match."""
    if not data:
        raise CorruptCheckpointError(source, "metadata file is empty")
    head, sep, body = data.partition(b"\n")
    if not sep:
        raise CorruptCheckpointError(source, "truncated metadata: header line is incomplete")
    try:
        header = json.loads(head)
    except ValueError:
        raise CorruptCheckpointError(
            source, "not a Cairn checkpoint metadata file (header is not JSON)"
        ) from None
    if not isinstance(header, dict) or header.get("format") != METADATA_FORMAT:
        raise CorruptCheckpointError(source, "not a Cairn checkpoint metadata file")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= METADATA_VERSION:
        raise CorruptCheckpointError(
            source,
            f"unsupported metadata version {version!r} (this Cairn reads versions "
            f"1..{METADATA_VERSION})",
        )
    expected = header.get("body_length")
    if len(body) != expected:
        short = isinstance(expected, int) and len(body) < expected
        what = "truncated metadata" if short else "metadata has trailing data"
        raise CorruptCheckpointError(
            source, f"{what}: body has {len(body)} bytes, header says {expected}"
        )
    if hashlib.sha256(body).hexdigest() != header.get("body_sha256"):
        raise CorruptCheckpointError(source, "metadata checksum mismatch (file is corrupted)")
    return header, body, version


def _mac(key: SigningKey, version: int, body: bytes) -> str:
    # The version is signed too: it decides how the body is read.
    message = f"{METADATA_FORMAT} {version}\n".encode() + body
    return hmac.new(key.secret, message, hashlib.sha256).hexdigest()


def _check_signature(
    header: Mapping[str, Any], body: bytes, version: int, key: SigningKey | None, source: str
) -> SignatureStatus:
    mac = header.get("body_hmac_sha256")
    if key is None:
        return SignatureStatus.UNSIGNED if mac is None else SignatureStatus.UNCHECKED
    what = f"checkpoint {_claimed_id(body)}"
    if mac is None:
        raise UnverifiedCheckpointError(
            source,
            f"{what} is not signed, but a signing key is set (cairn.checkpoint.signing-key): "
            "refusing to trust it",
        )
    if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(key, version, body)):
        raise UnverifiedCheckpointError(
            source,
            f"the signature of {what} does not match the signing key (signed with another "
            "key, or the metadata was changed after it was signed): refusing to trust it",
        )
    return SignatureStatus.VERIFIED


def _claimed_id(body: bytes) -> str:
    """The id the (untrusted) body claims, for messages only; '?' if there is none."""
    try:
        cid = json.loads(body).get("checkpoint_id")
    except (ValueError, AttributeError):
        return "?"
    return str(cid) if isinstance(cid, int) else "?"


def _metadata_to_json(md: CheckpointMetadata) -> dict[str, Any]:
    return {
        "job_id": md.job_id,
        "checkpoint_id": md.checkpoint_id,
        "is_savepoint": md.is_savepoint,
        "trigger_ms": md.trigger_ms,
        "completed_ms": md.completed_ms,
        "max_parallelism": md.max_parallelism,
        "properties": dict(md.properties),
        "stats": _stats_to_json(md.stats),
        "operators": [
            {
                "uid": op.uid,
                "parallelism": op.parallelism,
                "max_parallelism": op.max_parallelism,
                "subtasks": {str(i): _subtask_to_json(s) for i, s in op.subtasks.items()},
            }
            for op in md.operators.values()
        ],
    }


def _metadata_from_json(obj: dict[str, Any], version: int, source: str) -> CheckpointMetadata:
    operators: dict[OperatorUid, OperatorMetadata] = {}
    for op in obj["operators"]:
        uid = OperatorUid(str(op["uid"]))
        subtasks = {
            SubtaskIndex(int(i)): _subtask_from_json(s, f"operator {uid!r} subtask {i}", source)
            for i, s in op["subtasks"].items()
        }
        operators[uid] = OperatorMetadata(
            uid, int(op["parallelism"]), int(op["max_parallelism"]), subtasks
        )
    return CheckpointMetadata(
        job_id=JobId(str(obj["job_id"])),
        checkpoint_id=CheckpointId(int(obj["checkpoint_id"])),
        trigger_ms=int(obj["trigger_ms"]),
        completed_ms=int(obj["completed_ms"]),
        max_parallelism=int(obj["max_parallelism"]),
        operators=operators,
        is_savepoint=bool(obj["is_savepoint"]),
        stats=_stats_from_json(obj.get("stats", {})),
        properties={str(k): str(v) for k, v in obj["properties"].items()},
        version=version,
    )


_TOTALS = tuple(n for n in CheckpointSummaryStats.__dataclass_fields__ if n != "subtasks")
_METRICS = tuple(SubtaskCheckpointMetrics.__dataclass_fields__)


def _stats_to_json(s: CheckpointSummaryStats) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(s, name) for name in _TOTALS}
    if s.subtasks:  # absent, not empty, when unknown: older readers then still parse the file
        out["subtasks"] = [
            {
                "vertex_id": sub.task.vertex_id,
                "subtask_index": sub.task.subtask_index,
                "ack_ms": sub.ack_ms,
                **{name: getattr(sub.metrics, name) for name in _METRICS},
            }
            for sub in s.subtasks
        ]
    return out


def _stats_from_json(obj: dict[str, Any]) -> CheckpointSummaryStats:
    """Totals and per-subtask rows; keys missing in older metadata take their defaults."""

    def typed(name: str, value: Any) -> Any:
        return bool(value) if name == "unaligned" else int(value)

    subtasks = tuple(
        SubtaskStats(
            TaskKey(VertexId(int(row["vertex_id"])), SubtaskIndex(int(row["subtask_index"]))),
            int(row["ack_ms"]),
            SubtaskCheckpointMetrics(**{n: typed(n, row[n]) for n in _METRICS if n in row}),
        )
        for row in obj.get("subtasks", ())
    )
    totals = {n: typed(n, obj[n]) for n in _TOTALS if n in obj}
    return CheckpointSummaryStats(**totals, subtasks=subtasks)


def _range_to_json(r: StreamRange) -> list[int]:
    return [r.offset, r.length, r.crc32]


def _range_from_json(v: list[int]) -> StreamRange:
    offset, length, crc = v
    return StreamRange(int(offset), int(length), int(crc))


def _subtask_to_json(s: OperatorSubtaskState) -> dict[str, Any]:
    return {
        "keyed": [_keyed_to_json(h) for h in s.keyed],
        "operator": [
            {
                "path": h.path,
                "section": _range_to_json(h.section),
                "states": {name: [mode, count] for name, (mode, count) in h.states.items()},
                "size": h.size,
            }
            for h in s.operator
        ],
        **(
            {
                "keyed_schema": {
                    name: {"kind": sc.kind, "types": list(sc.types)}
                    for name, sc in s.keyed_schema.items()
                }
            }
            if s.keyed_schema
            else {}
        ),
        # Inline values are pickled bytes (pickle_inline); they stay opaque here.
        "inline": {name: base64.b64encode(v).decode("ascii") for name, v in s.inline.items()},
        **(
            {}
            if s.input_channels is None
            else {
                "input_channels": {
                    "path": s.input_channels.path,
                    "num_channels": s.input_channels.num_channels,
                    "buffers": {
                        str(c): [_range_to_json(r) for r in rs]
                        for c, rs in s.input_channels.buffers.items()
                    },
                    "size": s.input_channels.size,
                }
            }
        ),
    }


def _subtask_from_json(obj: dict[str, Any], where: str, source: str) -> OperatorSubtaskState:
    keyed = tuple(_keyed_from_json(h) for h in obj["keyed"])
    operator = tuple(
        OperatorStateHandle(
            path=str(h["path"]),
            section=_range_from_json(h["section"]),
            states={str(n): (str(m), int(c)) for n, (m, c) in h["states"].items()},
            size=int(h["size"]),
        )
        for h in obj["operator"]
    )
    inline: dict[str, bytes] = {}
    for name, encoded in obj["inline"].items():
        try:  # never unpickled here: see OperatorSubtaskState.inline_value
            inline[str(name)] = base64.b64decode(encoded, validate=True)
        except (binascii.Error, TypeError, ValueError) as e:
            raise CorruptCheckpointError(
                source, f"inline value {name!r} of {where} is not base64: {e!r}"
            ) from e
    channels = None
    if "input_channels" in obj:  # written by unaligned checkpoints only
        ic = obj["input_channels"]
        channels = InputChannelStateHandle(
            path=str(ic["path"]),
            num_channels=int(ic["num_channels"]),
            buffers={
                int(c): tuple(_range_from_json(r) for r in rs) for c, rs in ic["buffers"].items()
            },
            size=int(ic["size"]),
        )
    schema = {
        str(name): KeyedStateSchema(
            str(sc["kind"]), tuple(None if t is None else str(t) for t in sc["types"])
        )
        for name, sc in obj.get("keyed_schema", {}).items()
    }
    return OperatorSubtaskState(
        keyed=keyed,
        operator=operator,
        inline=inline,
        input_channels=channels,
        keyed_schema=schema,
    )


def _keyed_to_json(h: AnyKeyedStateHandle) -> dict[str, Any]:
    if isinstance(h, RocksDBKeyedStateHandle):  # a "kind" only here: heap entries predate it
        return {
            "kind": "rocksdb",
            "key_group_start": h.key_group_start,
            "key_group_end": h.key_group_end,
            "files": [
                {
                    "name": f.name,
                    "path": f.path,
                    "size": f.size,
                    "crc32": f.crc32,
                    **({"shared": True} if f.shared else {}),
                }
                for f in h.files
            ],
            "size": h.size,
            "persisted_size": h.persisted_size,
            "backend_id": h.backend_id,
            "base_checkpoint_id": h.base_checkpoint_id,
        }
    return {
        "path": h.path,
        "key_group_start": h.key_group_start,
        "key_group_end": h.key_group_end,
        "sections": {str(kg): _range_to_json(r) for kg, r in h.sections.items()},
        "size": h.size,
    }


def _keyed_from_json(h: dict[str, Any]) -> AnyKeyedStateHandle:
    kind = h.get("kind", "heap")
    if kind == "rocksdb":
        return RocksDBKeyedStateHandle(
            key_group_start=int(h["key_group_start"]),
            key_group_end=int(h["key_group_end"]),
            files=tuple(
                RocksDBStateFile(
                    str(f["name"]),
                    str(f["path"]),
                    int(f["size"]),
                    int(f["crc32"]),
                    bool(f.get("shared", False)),
                )
                for f in h["files"]
            ),
            size=int(h["size"]),
            persisted_size=int(h.get("persisted_size", -1)),
            backend_id=str(h.get("backend_id", "")),
            base_checkpoint_id=None
            if h.get("base_checkpoint_id") is None
            else CheckpointId(int(h["base_checkpoint_id"])),
        )
    if kind != "heap":
        raise ValueError(f"unknown keyed state handle kind {kind!r}")
    return KeyedStateHandle(
        path=str(h["path"]),
        key_group_start=int(h["key_group_start"]),
        key_group_end=int(h["key_group_end"]),
        sections={int(kg): _range_from_json(r) for kg, r in h["sections"].items()},
        size=int(h["size"]),
    )
