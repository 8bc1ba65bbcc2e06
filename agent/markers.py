"""The citation marker's form, a contract (DESIGN.md): [s12]. Kept apart so every module can read it."""

from __future__ import annotations

import re

MARKER_RE = re.compile(r"\[s(\d+)\]")
