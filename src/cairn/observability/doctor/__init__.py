"""``cairn doctor``: the seeds' checkpoint advice applied to a job's statistics (pure rules in
``rules.py`` over the facts of ``facts.py``)."""
