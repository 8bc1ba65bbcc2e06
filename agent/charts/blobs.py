"""A chart's PNG in the run's result store (Redis in a worker), not in run state.

The store holds text, so the bytes go in as base64 under the chart version's own id
(models.blob_id); the publisher reads them back with `load_png` to upload them.
"""

from __future__ import annotations

import base64
import binascii

from ..results import Locator, ResultStore, StoredResult

__all__ = ["BLOB_KIND", "load_png", "save_png"]

BLOB_KIND = "chart_png"


async def save_png(store: ResultStore, blob_id: str, png: bytes, *, title: str) -> None:
    await store.put(
        StoredResult(
            id=blob_id,
            kind=BLOB_KIND,
            arguments={"title": title},
            text=base64.b64encode(png).decode("ascii"),
            locator=Locator(what=f"chart {title!r} (PNG, {len(png):,} bytes)", total=len(png)),
        )
    )


async def load_png(store: ResultStore, blob_id: str) -> bytes | None:
    """The PNG bytes, or None when the blob is gone (expired) or is not a chart."""
    stored = await store.get(blob_id)
    if stored is None or stored.kind != BLOB_KIND:
        return None
    try:
        return base64.b64decode(stored.text, validate=True)
    except (binascii.Error, ValueError):
        return None
