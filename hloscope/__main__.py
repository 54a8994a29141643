"""``python -m hloscope`` runs the command-line interface."""

from hloscope.cli import main

raise SystemExit(main())
