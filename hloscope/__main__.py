"""``python -m hloscope`` runs the command-line interface."""

from hloscope.cli import console_main

raise SystemExit(console_main())
