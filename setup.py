"""The optional C scanner of HLO bodies (hloscope/parsers/_block_scan.c). Everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build prints a warning and goes on, and
hloscope uses the same scan written in Python (hloscope/parsers/_block_rows.py), about 30% slower to parse.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hloscope.parsers._block_scan", ["hloscope/parsers/_block_scan.c"], optional=True)])
