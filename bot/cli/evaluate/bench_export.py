"""Reports in the JSONL DeepResearch Bench's scorer reads: one {"id", "prompt", "article"} a line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

__all__ = ["BenchArticle", "bench_id", "write_bench_jsonl"]


class BenchArticle(BaseModel):
    id: str | int  # the benchmark numbers its prompts; a numeric id is written back as a number
    prompt: str
    article: str


def write_bench_jsonl(path: Path, articles: Sequence[BenchArticle]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for article in articles:
            out.write(json.dumps(article.model_dump(), ensure_ascii=False) + "\n")


def bench_id(question_id: str) -> str | int:
    return int(question_id) if question_id.isdigit() else question_id
