"""`python -m tileforge`: the remote commands."""

import sys

from tileforge.cli import main

sys.exit(main())
