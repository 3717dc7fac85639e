"""Checkpointing on the driver side: storage, metadata, protocol decisions, coordinator.

Modules, from values to the shell that executes decisions:

* ``errors``      the layer's errors, each naming the path it is about
* ``failure``     ``CheckpointFailureReason``, shared with the runtime's barrier handlers
* ``handles``     where a piece of state lives (relative paths, checksummed ranges)
* ``messages``    task -> coordinator messages and typed outcomes (AckResult)
* ``metadata``    ``_metadata`` values and their checksummed JSON codec
* ``protocol``    pure decisions: trigger, subsume, restore choice, failure counting, retention
* ``pending``     acknowledgement accounting of one triggered checkpoint
* ``shared_state`` which shared files of incremental checkpoints may go (pure)
* ``restore``     verifying restore candidates, then the pure choice among them
* ``stats``       Flink-style checkpoint statistics
* ``local_files`` private (0600/0700) files and directories on a local disk
* ``locations``   fsspec paths; private, atomic writes; paths kept inside their directory
* ``state_files`` state file writer and reader (digest-named under a signing key)
* ``loading``     resolving a path to complete checkpoints and reading their ``_metadata``
* ``inspection``  verifying state files, listing checkpoints
* ``storage``     a job's directories ``<url>/<job>/chk-<n>/``: publish, discard, savepoints
* ``storage_access`` the pre-flight probe of the storage at submission
* ``store``       retained completed checkpoints and their cleanup
* ``cleanup``     what the coordinator deletes (aborted, subsumed, shared files), best effort
* ``restore_points`` the job's restore candidates and which of them were announced
* ``savepoint_queue`` savepoints queued until they may start, then in flight
* ``coordinator`` the imperative shell the job master drives

Nothing is re-exported here so that importing ``cairn.checkpoint.handles`` from the runtime
never pulls in the coordinator (and its imports) and cannot create an import cycle.
"""
