"""ember-autograd's tests alone (``nox -s autograd``) run without the packages above it (ember-nn, ...). A test
whose own code reaches for one of them (``ember.nn.Linear``) is reported as skipped, naming what it needs; the
same error raised from inside ember's library code still fails: that would be a layering bug."""

from __future__ import annotations

from pathlib import Path

import pytest


def _missing_package(excinfo, test_dir: Path):
    value = excinfo.value
    if isinstance(value, ModuleNotFoundError) and (value.name or "").startswith("ember."):
        missing = value.name
    elif isinstance(value, AttributeError) and "install the package that provides ember." in str(value):
        missing = str(value).rsplit("provides ", 1)[1]
    else:
        return None
    # the innermost frame outside ember's modules is where the package was asked for
    callers = [entry for entry in excinfo.traceback if "/ember/" not in Path(entry.path).as_posix()]
    return missing if callers and Path(callers[-1].path).parent == test_dir else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed or report.when != "call":
        return
    missing = _missing_package(call.excinfo, Path(item.path).parent)
    if missing:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: needs {missing}, not installed here")
