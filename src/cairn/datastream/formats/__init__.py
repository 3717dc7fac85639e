"""Record formats with PyFlink's names (``pyflink.datastream.formats``): ``json``, ``csv``,
``avro``, ``parquet``, ``orc``; ``arrow`` maps row types to Arrow schemas for the columnar
ones. The message (row) schemas themselves live in ``cairn.common.formats``."""
