"""The optional C readers of HLO text: the scanner of bodies (hloscope/parsers/_block_scan.c) and the reader of one
attribute (hloscope/parsers/_attribute_scan.c). Everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build prints a warning and goes on, and
hloscope uses the same reads written in Python (hloscope/parsers/_block_rows.py, _attribute_value.py): about 30%
slower to parse, and slower ops tables for modules with metadata.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("hloscope.parsers._block_scan", ["hloscope/parsers/_block_scan.c"], optional=True),
    Extension("hloscope.parsers._attribute_scan", ["hloscope/parsers/_attribute_scan.c"], optional=True),
    Extension("hloscope.cost._cost_walk", ["hloscope/cost/_cost_walk.c"], optional=True),
])
