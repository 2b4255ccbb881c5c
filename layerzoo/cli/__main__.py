"""`python -m layerzoo.cli`: the `layerzoo` command."""

import sys

from . import main

sys.exit(main())
