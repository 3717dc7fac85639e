"""The control endpoint of a running job: Flink's REST paths over HTTP on the driver
(``endpoint.py``, pure JSON views in ``views.py``), the per-user registry of the jobs running
on this machine (``registry.py``), and the client the CLI uses (``client.py``).

Layer: above observability, below the composition root (``cairn.launch`` starts an
endpoint per job) and the CLI (which reads the registry and calls the endpoints).
"""
