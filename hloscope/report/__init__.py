"""Presentation only: the terminal (rich), HTML, and diff renderings of a ``Report`` or ``Diff``.

Nothing here computes a number that is not already in the tables it is given, and nothing here imports
``hloscope.analysis``, ``hloscope.compare``'s engine inputs or the pytest plugin. The ``Report`` itself lives in
``hloscope.result``; the JSON form is ``Report.to_json``.
"""
