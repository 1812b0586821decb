from __future__ import annotations

import sys

from reference_engine import cli

sys.exit(cli.main())
