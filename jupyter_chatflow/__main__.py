"""`python -m jupyter_chatflow` is the `chatflow` command."""

import sys

from .frontends.cli import main

sys.exit(main())
