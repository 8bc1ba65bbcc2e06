"""`deepthread ask --out FILE.pdf|.docx|.md`: the report in the format the file's suffix names, the same
file `export` uploads in Slack (bot/publishing/export.py), opened again with pypdf and python-docx."""
from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from docx import Document
from pypdf import PdfReader

from tests.processes import DEEPTHREAD, ROOT, environment

QUESTION = "expense ratio VTI SCHB ITOT"


@pytest.mark.parametrize("suffix", [".pdf", ".docx", ".md"])
def test_ask_writes_the_report_in_the_format_its_file_names(tmp_path: Path, fake_model, fake_web, suffix: str) -> None:
    out = tmp_path / f"report{suffix}"
    env = environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake_model.url, DEEPTHREAD_SEARCH="searxng",
                      SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1")
    done = subprocess.run(DEEPTHREAD + ["ask", QUESTION, "--out", str(out)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    content = out.read_bytes()
    if suffix == ".pdf":
        text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)
    elif suffix == ".docx":
        text = "\n".join(p.text for p in Document(io.BytesIO(content)).paragraphs)
    else:
        text = content.decode()
    flat = "".join(text.split())
    assert "".join(QUESTION.split()) in flat
    assert f"{fake_web.url}/pages/".replace("http://", "") in flat.replace("http://", ""), "the sources' URLs"
    assert not list(tmp_path.glob("*.partial")), "written atomically"
