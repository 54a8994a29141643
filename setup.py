"""The optional C parts: the reader of computations and their bodies (hloscope/parsers/_block_scan.c), the reader of one
attribute (hloscope/parsers/_attribute_scan.c), the cost walk's shared rows and the columns of its rows
(hloscope/cost/_cost_walk.c), the memory model's post order, its walk over plain instructions and its buffer
assigner (hloscope/memory/_post_order.c, _liveness_walk.c, _buffer_assign.c) and the printer of a report's tables
as JSON (hloscope/result/_json_table.c); hloscope/_slot_fields.h is a header two of them include. Everything else is in
pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build prints a warning and goes on, and
hloscope uses the same steps written in Python (each C file names its twin): the analysis of the corpus's large
modules takes 2-2.3x as long.
"""

from setuptools import Extension, setup

#: Reading hloscope's records' slots in place, shared by the memory model's walk and buffer assigner.
SLOT_FIELDS = "hloscope/_slot_fields.h"

setup(ext_modules=[
    Extension("hloscope.parsers._block_scan", ["hloscope/parsers/_block_scan.c"], optional=True),
    Extension("hloscope.parsers._attribute_scan", ["hloscope/parsers/_attribute_scan.c"], optional=True),
    Extension("hloscope.cost._cost_walk", ["hloscope/cost/_cost_walk.c"], optional=True),
    Extension("hloscope.memory._post_order", ["hloscope/memory/_post_order.c"], optional=True),
    Extension("hloscope.memory._liveness_walk", ["hloscope/memory/_liveness_walk.c"], depends=[SLOT_FIELDS],
              optional=True),
    Extension("hloscope.memory._buffer_assign", ["hloscope/memory/_buffer_assign.c"], depends=[SLOT_FIELDS],
              optional=True),
    Extension("hloscope.result._json_table", ["hloscope/result/_json_table.c"], optional=True),
])
