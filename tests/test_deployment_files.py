"""The Dockerfile and compose.yaml a team deploys with (Docker is not on these machines: the real-process
tests in tests/e2e are what prove the topology; these hold the files to it): the compose file parses,
runs the Procfile's commands as two serve replicas and two workers, and wires them to a primary, a
replica and three sentinels through a REDIS_URL that Deepthread reads as that Sentinel service."""
from __future__ import annotations

import re
import shlex
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
