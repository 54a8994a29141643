"""Presentation: per-op and per-module tables, the report JSON, terminal and HTML rendering, diffs."""

from hloscope.report._report import SCHEMA as SCHEMA
from hloscope.report._report import Report as Report
from hloscope.report._report import load_report as load_report
