"""The built-in options live in group modules (``cairn.common.options``); ``config_options``
must still export every one of them under its name, and register nothing else."""

from __future__ import annotations

import importlib
import pkgutil

import cairn.common.options
from cairn.common import config_options as opts
from cairn.common.config_registry import ConfigOption, all_options


def _group_options() -> dict[str, ConfigOption]:
    found: dict[str, ConfigOption] = {}
    for info in pkgutil.iter_modules(cairn.common.options.__path__):
        module = importlib.import_module(f"cairn.common.options.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, ConfigOption):
                found[name] = value
    return found


def test_config_options_exports_every_option_of_every_group() -> None:
    for name, option in _group_options().items():
        assert getattr(opts, name, None) is option, name


def test_every_built_in_key_is_exported_by_config_options() -> None:
    exported = {v.key for v in vars(opts).values() if isinstance(v, ConfigOption)}
    registered = {o.key for o in all_options()}
    # Other layers may register keys of their own; the built-in ones are all exported.
    assert exported <= registered
    assert {o.key for o in _group_options().values()} <= exported
    assert len(exported) >= 75  # as many as before the split into groups


def test_old_helper_names_still_define_options() -> None:
    assert opts._spellings(("a", "b")) == {"a": "a", "b": "a"}
    assert opts._at_least(1, "x")(0) == "x must be at least 1, got 0"
    assert opts.CP == "execution.checkpointing." and opts.RS == "restart-strategy."
