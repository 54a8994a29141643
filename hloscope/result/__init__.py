"""The one result of an analysis: ``Report`` -- tables, totals, coverage, notes, assertions, JSON round-trip.

Made by ``hloscope.analyze`` (through ``hloscope.roofline.tables``), read back by ``load_report``, compared by
``hloscope.compare`` and shown by ``hloscope.report``.
"""

from hloscope.result.report import SCHEMA as SCHEMA
from hloscope.result.report import Report as Report
from hloscope.result.report import load_report as load_report
