"""Where the tests find the checkout, their snapshots and the saved pages, wherever a test module sits."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SNAPSHOTS = TESTS / "snapshots"
PAGES = TESTS / "pages"
# Real saved pages, used in addition when the shared folder is beside the checkout.
SHARED_PAGES = ROOT.parent / "shared" / "fixtures" / "pages"
