"""Record formats with PyFlink's names (``pyflink.datastream.formats``): ``json``."""
