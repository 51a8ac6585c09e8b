"""`python -m jupyter_chatflow` is the `chatflow` command."""

import sys

from .cli import main

sys.exit(main())
