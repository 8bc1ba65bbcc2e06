"""The Dockerfile and compose.yaml a team deploys with (Docker is not on these machines: the real-process
tests in tests/e2e are what prove the topology; these hold the files to it): the compose file parses,
runs the Procfile's commands as two serve replicas and two workers, and wires them to a primary, a
replica and three sentinels through a REDIS_URL that Deepthread reads as that Sentinel service."""
from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

import yaml

from jobs.keyspace.connection import parse_redis_url
from tests.paths import ROOT


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def procfile() -> dict[str, list[str]]:
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if ":" in line:
            kind, command = line.split(":", 1)
            entries[kind.strip()] = shlex.split(command)
    return entries


def entrypoint() -> list[str]:
    [line] = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("ENTRYPOINT")]
    return yaml.safe_load(line.removeprefix("ENTRYPOINT"))


def services_running(command: list[str]) -> list[str]:
    return sorted(name for name, service in compose()["services"].items()
                  if entrypoint() + (service.get("command") or []) == command)


def test_compose_runs_the_procfiles_commands_as_two_serve_replicas_and_two_workers() -> None:
    commands = procfile()
    assert set(commands) == {"web", "worker"}
    assert services_running(commands["web"]) == ["serve-1", "serve-2"]
    assert services_running(commands["worker"]) == ["worker-1", "worker-2"]


def test_the_image_runs_unprivileged_with_serve_by_default_and_a_liveness_check() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert user and user[-1] not in ("root", "0")
    [cmd] = re.findall(r"^CMD (.+)$", dockerfile, re.M)
    assert entrypoint() + yaml.safe_load(cmd) == procfile()["web"]
    assert "/healthz" in dockerfile and "STOPSIGNAL SIGTERM" in dockerfile


def test_compose_wires_every_process_to_the_sentinels_watching_the_primary() -> None:
    services = compose()["services"]
    sentinels = sorted(n for n in services if n.startswith("sentinel-"))
    assert len(sentinels) == 3
    script = services["sentinel-1"]["command"][-1]
    monitor = re.search(r"sentinel monitor (\S+) (\S+) (\d+) (\d+)", script)
    assert monitor, script
    service_name, primary, port, quorum = monitor.groups()
    assert primary in services and int(quorum) == 2, "a majority of three sentinels decides a failover"
    [replica] = [n for n, s in services.items() if "--replicaof" in (s.get("command") or [])]
    assert services[replica]["command"][services[replica]["command"].index("--replicaof") + 1] == primary
    for name in ("serve-1", "serve-2", "worker-1", "worker-2"):
        target = parse_redis_url(services[name]["environment"]["REDIS_URL"])
        assert target.topology == "sentinel" and target.service == service_name
        assert sorted(host for host, _ in target.sentinels) == sentinels
        assert services[name]["stop_grace_period"] == "30s"
    for name in (primary, replica):
        command = services[name]["command"]
        assert command[command.index("--maxmemory-policy") + 1] == "noeviction"


def test_each_process_is_checked_on_its_own_health_endpoint() -> None:
    services = compose()["services"]
    for name in ("serve-1", "serve-2"):
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"])
        assert services[name]["environment"]["PORT"] in " ".join(services[name]["healthcheck"]["test"])
    for name in ("worker-1", "worker-2"):
        port = services[name]["environment"]["DEEPTHREAD_HEALTH_PORT"]
        assert f":{port}/healthz" in " ".join(services[name]["healthcheck"]["test"])


# --- what the image and the stack are built from (issue 49) ---------------------------------------

SEMVER_TAG = re.compile(r"^\d+\.\d+\.\d+(-[a-z0-9.-]+)?$")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def dockerfile_bases() -> list[str]:
    return re.findall(r"^FROM\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.M)


def image_tag(image: str) -> str:
    name = image.split("@", 1)[0]
    return name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""


def release() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_every_image_is_pinned_by_its_exact_version_and_the_base_by_digest_too() -> None:
    """No `latest`, no bare `redis:7` or `python:3.11-slim`: a rebuild gets the releases it was tested with."""
    [base] = dockerfile_bases()
    assert SEMVER_TAG.match(image_tag(base).removesuffix("-slim-bookworm")), base
    assert DIGEST.search(base), f"{base}: the base image is pinned by digest as well"
    images = {name: service["image"] for name, service in compose()["services"].items() if "image" in service}
    assert images, "compose.yaml names its images"
    for name, image in images.items():
        assert SEMVER_TAG.match(image_tag(image)), f"{name}: {image} is not pinned to an exact version"
    built = {image for name, image in images.items() if "build" in compose()["services"][name]}
    assert built == {f"deepthread:{release()}"}, "the image built here is tagged with the release it is"


def test_compose_reads_env_in_a_form_every_compose_accepts() -> None:
    """`env_file` with `path`/`required` needs Docker Compose >= 2.24 (docker-compose 1.29 refuses the file):
    a plain path works everywhere, and .env.example says what to put in it."""
    for name, service in compose()["services"].items():
        env_file = service.get("env_file")
        if env_file is not None:
            assert env_file == ".env", f"{name}: env_file {env_file!r}"
    example = (ROOT / ".env.example").read_text()
    for variable in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY"):
        assert re.search(rf"^{variable}=$", example, re.M), f"{variable} is in .env.example, empty"


def ignored(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0


def test_no_redis_dump_or_secrets_file_is_committed_and_git_ignores_them() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert not [f for f in tracked.splitlines() if f.endswith((".rdb", ".aof")) or f == ".env"], tracked
    for path in ("dump.rdb", "appendonlydir/appendonly.aof.1.base.rdb", ".env"):
        assert ignored(path), f"{path} is not git-ignored"


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def excluded(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern that matches decides (a leading ! includes again)."""
    from fnmatch import fnmatch

    decision = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        pattern = pattern.lstrip("!").removeprefix("**/").rstrip("/")
        if fnmatch(path, pattern) or fnmatch(path.split("/", 1)[0], pattern) or fnmatch(path.rsplit("/", 1)[-1],
                                                                                        pattern):
            decision = not keep
    return decision


def test_the_build_context_leaves_out_the_venv_git_caches_and_dumps_but_not_what_the_image_copies() -> None:
    patterns = dockerignore()
    for path in (".venv/bin/python", ".git/HEAD", ".mypy_cache/x", ".pytest_cache/x", ".ruff_cache/x",
                 "agent/__pycache__/loop.cpython-311.pyc", ".hypothesis/examples", "dump.rdb",
                 "appendonlydir/appendonly.aof.1.incr.aof", ".env", "deepthread.egg-info/PKG-INFO", "tests/conftest.py"):
        assert excluded(path, patterns), f"{path} would be sent to the build"
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", (ROOT / "Dockerfile").read_text(), re.M)
    sources = [source for line in copied for source in line.split()]
    assert sources, "the Dockerfile copies the project"
    for source in sources:
        assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which is not in the repository"
        assert not excluded(source, patterns), f"the Dockerfile copies {source}, which .dockerignore leaves out"


def test_every_install_is_from_the_lock_with_hashes() -> None:
    """scripts/up, test and lint install through scripts/install, which installs requirements/KIND.txt with
    --require-hashes and then the project without dependencies; the image does the same; CI runs lint and test."""
    install = (ROOT / "scripts" / "install").read_text()
    assert '--require-hashes -r "$lock"' in install and 'lock="requirements/$kind.txt"' in install
    assert "--no-deps -e ." in install, "the project adds no package the lock did not pin"
    for script, kind in (("up", "app"), ("test", "test"), ("lint", "test")):
        text = (ROOT / "scripts" / script).read_text()
        assert f"bash scripts/install {kind}" in text, f"scripts/{script} does not install from the {kind} lock"
        assert "pip install" not in text, f"scripts/{script} installs around the lock"
    dockerfile = (ROOT / "Dockerfile").read_text()
    pip = re.findall(r"pip install ([^&\n]+)", dockerfile)
    assert pip == ["--require-hashes -r requirements/app.txt", "--no-deps . "], pip
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/lint" in ci and "bash scripts/test" in ci and "pip install" not in ci
    for kind in ("app", "test"):
        lock = (ROOT / "requirements" / f"{kind}.txt").read_text()
        pins = re.findall(r"^([A-Za-z0-9_.\-\[\]]+)==\S+ \\$", lock, re.M)
        assert pins and lock.count("--hash=sha256:") >= len(pins), f"requirements/{kind}.txt pins with hashes"
def test_the_manifest_opens_the_home_and_messages_tabs_and_subscribes_to_what_they_need() -> None:
    """The Home tab (app_home_opened → views.publish) and the Messages tab people write to the bot in:
    without messages_tab_enabled a DM with the app cannot be started. views.publish needs no scope; the
    library's read-time checks (conversations.members, users.info) and permalinks need theirs granted."""
    from tests.fakes.scopes import METHOD_SCOPES, READ_SCOPES, manifest_bot_scopes
    from tests.helpers import api_methods_of, sdk_calls_in_code

    manifest = yaml.safe_load((ROOT / "manifest.yml").read_text())
    assert manifest["features"]["app_home"] == {
        "home_tab_enabled": True, "messages_tab_enabled": True, "messages_tab_read_only_enabled": False}
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert {"app_home_opened", "message.im", "app_mention"} <= set(events)
    called = {method for name in sdk_calls_in_code() for method in api_methods_of(name)}
    assert {"views.publish", "chat.getPermalink", "conversations.members", "conversations.info", "users.info"} <= called
    assert METHOD_SCOPES["views.publish"] == () and METHOD_SCOPES["chat.getPermalink"] == ()
    granted = manifest_bot_scopes()
    assert set(READ_SCOPES.values()) <= granted and "users:read" in granted and "im:history" in granted
    assert any("library" in c["usage_hint"] for c in manifest["features"]["slash_commands"])
