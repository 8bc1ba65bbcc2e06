"""Converting documents to located text, off the worker: one module, one entry, `await convert(...)`.

Owns the conversion of untrusted document bytes (files shared in a thread; PDFs and Office files
read from the web) into blocks of text that know where they are (page, sheet and row, slide),
and the limits that make a hostile file cost one killed child process, never the worker: a child
per document with OS limits on memory and CPU and a wall deadline that kills it (process.py,
child.py), checks made before parsing (zip members, rows, columns, PDF pages and content) and the
parsers themselves (parsers.py). Used by read_file and find_in_files (through file_text.py) and by
read_page's PDF and Office path (extract.py). Knows nothing of tools, runs or Slack.
"""

from __future__ import annotations

from ..exceptions import ConversionRefused
from .document import Block, FileText, location_of
from .limits import ConvertLimits
from .process import convert, last_stats

__all__ = ["Block", "ConversionRefused", "ConvertLimits", "FileText", "convert", "last_stats", "location_of"]
