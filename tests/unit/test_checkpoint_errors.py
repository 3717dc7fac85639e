"""The checkpoint layer's errors survive a pickle round trip with message and attributes."""

from __future__ import annotations

import pickle

import pytest

from cairn.checkpoint import errors

CASES = [
    errors.CorruptCheckpointError("/c/chk-3/_metadata", "checksum mismatch"),
    errors.UnverifiedCheckpointError("/c/chk-3/_metadata", "unsigned"),
    errors.CheckpointNotFoundError("/c/chk-9", "no such checkpoint"),
    errors.SavepointTargetExistsError("/sp/one", "already contains a savepoint (_metadata)"),
    errors.NoUsableCheckpointError("no usable checkpoint", [("/c/chk-2", "truncated")]),
    errors.FallbackRefusedError("refused", [("/c/chk-5", "missing file")]),
    errors.CheckpointFailedError(3, "CHECKPOINT_EXPIRED", "took too long", "savepoint"),
    errors.SavepointRejectedError("the job is not running"),
    errors.CheckpointStorageUnusableError("s3://b/c", "bucket 'b' does not exist"),
]


@pytest.mark.parametrize("error", CASES, ids=lambda e: type(e).__name__)
def test_an_error_pickles_with_its_message_and_attributes(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)
