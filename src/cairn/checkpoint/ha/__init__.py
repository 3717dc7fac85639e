"""High availability: one leader per job, fenced, and the pointer a new leader resumes from.

Invariant: everything here is built on one storage primitive, a conditional write
(``ConditionalStore``: create only if absent, replace only if unchanged); the lease and
pointer decisions are pure functions over what was read (``lease``, ``pointer``), and the
stores (``memory``, ``file_store``, ``s3_store``, ``gcs_store``, ``azure_store``; ``probe``
proves a server enforces the conditions) are thin shells that only read and write.
"""
