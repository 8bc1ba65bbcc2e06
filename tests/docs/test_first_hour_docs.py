"""What a new team and its operator read first says what is true: the HTTP-mode steps name the manifest
key that turns Socket Mode off, every setting is in the docs, the release has a version, a licence, a
changelog and a tag scheme, and the lock's scheduled refresh is a written step."""
from __future__ import annotations

import re
import tomllib

import yaml

from bot.settings import variable_names
from tests.paths import ROOT


def read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def test_the_http_mode_steps_turn_socket_mode_off_in_the_manifest() -> None:
    """A manifest left at socket_mode_enabled: true sends the events to a Socket Mode connection."""
    manifest = yaml.safe_load(read("manifest.yml"))
    assert "socket_mode_enabled" in manifest["settings"], "the key the docs name is the manifest's"
    for doc, steps in (("README.md", "HTTP mode instead"), ("docs/slack-app.md", "**HTTP mode** instead")):
        http_mode = read(doc).split(steps, 1)[1][:600]
        assert "`socket_mode_enabled: false`" in http_mode, f"{doc}: the HTTP-mode steps"


def test_every_setting_is_documented_for_the_operator() -> None:
    docs = read("docs/operating.md") + read("docs/slack-app.md")
    assert [name for name in variable_names() if name not in docs] == []


def test_a_release_has_its_version_licence_changelog_and_tag_scheme() -> None:
    version = tomllib.loads(read("pyproject.toml"))["project"]["version"]
    assert read("LICENSE").startswith("MIT License")
    changelog = read("CHANGELOG.md")
    assert "## [Unreleased]" in changelog and f"## [{version}]" in changelog
    contributing = read("docs/contributing.md")
    assert re.search(r"\*\*Tags\*\* are `v` and the version \(`v\d+\.\d+\.\d+`\)", contributing)


def test_the_lock_refresh_is_a_scheduled_written_step() -> None:
    operating = read("docs/operating.md")
    section = operating.split("## Images and the lock: pinned versions", 1)[1]
    assert "bash scripts/lock" in section and "each month" in section and "bash scripts/test" in section
