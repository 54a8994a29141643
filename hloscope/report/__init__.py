"""Presentation: per-op and per-module tables, the report JSON, terminal rendering."""

from hloscope.report._report import SCHEMA as SCHEMA
from hloscope.report._report import Report as Report
