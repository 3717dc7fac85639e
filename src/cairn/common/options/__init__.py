"""The built-in configuration options, one module per group (``define`` holds the helpers).

Invariant: importing a group module registers its keys; ``cairn.common.config_options``
imports every group and re-exports each option under its old name, so that is the module
callers import (and where a new group is added).
"""
