"""Readable page text from trafilatura's XML: structure kept, links as compact markers."""
from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from .links import LinkTable, marker, resolve_href, strip_markers

BLOCK_TAGS = {"p", "head", "item", "quote", "code", "row", "list", "table"}


@dataclass
class PageText:
    linked: str  # what the reader model sees: links as 【12†anchor】
    plain: str  # the same text with markers replaced by their anchor text (what excerpts are checked against)
    link_ids: list[int]


def _inline(element: etree._Element, page_url: str, links: LinkTable, ids: list[int]) -> str:
    parts = [element.text or ""]
    for child in element:
        if child.tag == "ref":
            anchor = "".join(child.itertext())
            url = resolve_href(child.get("target", ""), page_url)
            if url:
                link_id = links.add(url, anchor)
                ids.append(link_id)
                parts.append(marker(link_id, anchor, url, page_url))
            else:
                parts.append(anchor)
        elif child.tag == "lb":
            parts.append("\n")
        else:
            parts.append(_inline(child, page_url, links, ids))
        parts.append(child.tail or "")
    return "".join(parts)


def _blocks(element: etree._Element, page_url: str, links: LinkTable, ids: list[int], out: list[str]) -> None:
    for child in element:
        tag = child.tag
        if tag == "head":
            level = (child.get("rend") or "h2").lstrip("h")
            hashes = "#" * min(max(int(level) if level.isdigit() else 2, 1), 6)
            out.append(f"{hashes} {' '.join(_inline(child, page_url, links, ids).split())}")
        elif tag == "list":
            items = ["- " + " ".join(_inline(item, page_url, links, ids).split()) for item in child.iter("item")]
            out.append("\n".join(items))
        elif tag == "table":
            rows = []
            for row in child.iter("row"):
                cells = [" ".join(_inline(c, page_url, links, ids).split()) for c in row.iter("cell")]
                rows.append("| " + " | ".join(cells) + " |")
            out.append("\n".join(rows))
        elif tag == "quote":
            out.append("> " + " ".join(_inline(child, page_url, links, ids).split()))
        elif tag == "code":
            out.append("```\n" + "".join(child.itertext()).strip("\n") + "\n```")
        elif tag in ("p", "item", "cell"):
            text = "\n".join(" ".join(line.split()) for line in _inline(child, page_url, links, ids).split("\n"))
            if text.strip():
                out.append(text.strip())
        elif len(child):
            _blocks(child, page_url, links, ids, out)
        elif (child.text or "").strip():
            out.append(" ".join(child.text.split()))


def page_text(xml: str, page_url: str, links: LinkTable) -> PageText:
    root = etree.fromstring(xml.encode("utf-8"), parser=etree.XMLParser(recover=True, huge_tree=True))
    out: list[str] = []
    ids: list[int] = []
    main = root.find("main")
    _blocks(main if main is not None else root, page_url, links, ids, out)
    linked = "\n\n".join(out)
    return PageText(linked=linked, plain=strip_markers(linked), link_ids=list(dict.fromkeys(ids)))
