"""Row formats (JSON, CSV, Avro): records to message bytes and back, with PyFlink's names.

Invariant: these schemas depend only on ``cairn.common``'s types, so they sit below the
connectors that use them (the Kafka source and sink, the file source and sink); PyFlink's
module paths (``pyflink.datastream.formats.json`` ...) re-export them from
``cairn.datastream.formats``. ``values`` holds what they share: text to a typed value and
back, the field-and-value naming of errors, and the count of skipped records.
"""
