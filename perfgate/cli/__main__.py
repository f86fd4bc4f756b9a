"""``python -m perfgate.cli``: the ``perfgate`` command."""

from perfgate.cli import main

raise SystemExit(main())
