import importlib.util

import pytest


def _has(mod):
    return importlib.util.find_spec(mod) is not None


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mod, mark in (("trl", "needs_trl"), ("verl", "needs_verl")):
            if item.get_closest_marker(mark) and not _has(mod):
                item.add_marker(pytest.mark.skip(reason=f"{mod} is not installed in this venv"))


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_trl: needs TRL installed")
    config.addinivalue_line("markers", "needs_verl: needs verl installed")
