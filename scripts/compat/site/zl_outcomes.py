"""pytest plugin of scripts/compat (``-p zl_outcomes``): records every report as it comes.

Appends one JSON line per test phase (setup, call, teardown) and per failed
collection to the file named by ZL_COMPAT_OUTCOMES, flushed at once, so a
run killed by its timeout still leaves what it did. Under pytest-xdist only
the controller writes (it receives every worker's reports). compare.py
turns the lines into one outcome per test.
"""

import json
import os

_out = None


def pytest_configure(config):
    global _out
    path = os.environ.get("ZL_COMPAT_OUTCOMES")
    if path and not hasattr(config, "workerinput"):
        _out = open(path, "a", buffering=1)  # noqa: SIM115 (closed in unconfigure)


def pytest_unconfigure(config):
    global _out
    if _out is not None:
        _out.close()
        _out = None


def _message(report):
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    return text.strip()[:300]


def _record(nodeid, when, report):
    if _out is not None:
        line = {
            "nodeid": nodeid,
            "when": when,
            "outcome": report.outcome,
            "xfail": hasattr(report, "wasxfail"),
            "message": _message(report) if not report.passed else "",
        }
        _out.write(json.dumps(line) + "\n")


def pytest_runtest_logreport(report):
    _record(report.nodeid, report.when, report)


def pytest_collectreport(report):
    if report.failed:
        _record(report.nodeid, "collect", report)
