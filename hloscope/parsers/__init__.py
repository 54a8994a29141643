"""Readers: bytes and text in, the HLO model and timed events out. Errors carry their location."""

from hloscope.parsers._errors import HloParseError as HloParseError
from hloscope.parsers._hlo_decode import metadata_column as metadata_column
from hloscope.parsers._hlo_text import parse_hlo_text as parse_hlo_text
from hloscope.parsers._load import parse_hlo as parse_hlo
