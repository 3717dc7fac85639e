"""Event time in the runtime: timestamped batches, watermark generation, the watermark valve.

``stamped`` is how records carry timestamps (a batch with a parallel timestamp list, only when
timestamps exist); ``generation`` turns a ``WatermarkStrategy`` into timestamps and periodic
watermarks; ``valve`` merges the watermarks of a task's input channels. All three are pure:
no I/O, no clock of their own (callers pass the time).
"""
