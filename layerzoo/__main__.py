"""`python -m layerzoo`: the `layerzoo` command."""

import sys

from .cli import main

sys.exit(main())
