"""The image builds and compose.yaml is a valid Compose file, checked by a real container engine: Docker
(with a running daemon), Podman or Buildah to build, and `docker compose`, docker-compose or podman-compose
to read the file. Each test skips, saying why, when no engine is installed, or when the engine cannot pull
the base image (a machine that reaches only the package registries, not a container registry)."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT
from tests.test_deployment_files import dockerfile_bases, release

# Pulling the base image, then installing the locked packages into it: minutes on a cold cache.
BUILD_SECONDS = 1_800
PULL_SECONDS = 300


def _works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def builder() -> list[str] | None:
    """The command that builds an image here, or None."""
    if shutil.which("docker") and _works(["docker", "info"]):
        return ["docker", "build"]
    if shutil.which("podman"):
        return ["podman", "build"]
    if shutil.which("buildah"):
        return ["buildah", "bud"]
    return None


def puller() -> list[str] | None:
    if shutil.which("docker") and _works(["docker", "info"]):
        return ["docker", "pull"]
    for tool in ("podman", "buildah"):
        if shutil.which(tool):
            return [tool, "pull"]
    return None


def composer() -> list[str] | None:
    """The Compose implementation here, or None."""
    if shutil.which("docker") and _works(["docker", "compose", "version"]):
        return ["docker", "compose"]
    for tool in ("docker-compose", "podman-compose"):
        if shutil.which(tool):
            return [tool]
    return None


def test_compose_config_accepts_the_file_as_it_is(tmp_path: Path) -> None:
    compose = composer()
    if compose is None:
        pytest.skip("no Compose implementation here (docker compose, docker-compose or podman-compose); "
                    "tests/test_deployment_files.py still checks the file's content")
    # A copy beside an empty .env: the file needs one (as `docker compose up` does), and a developer's own
    # .env, with its secrets, is never read or printed by a test.
    (tmp_path / "compose.yaml").write_text((ROOT / "compose.yaml").read_text())
    (tmp_path / ".env").write_text("")
    done = subprocess.run([*compose, "-f", "compose.yaml", "config"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{' '.join(compose)} config: {done.stderr}"
    resolved = yaml.safe_load(done.stdout)["services"]
    assert {"serve-1", "serve-2", "worker-1", "worker-2", "redis-primary", "redis-replica", "sentinel-1",
            "sentinel-2", "sentinel-3"} <= set(resolved)
    assert resolved["serve-1"]["image"] == f"deepthread:{release()}"
    assert {service["image"] for name, service in resolved.items() if name.startswith(("redis", "sentinel"))} == {
        "redis:7.4.6"}


def test_the_image_builds(tmp_path: Path) -> None:
    """Where no registry is reachable, DEEPTHREAD_TEST_BASE_IMAGE names a local stand-in for the Dockerfile's
    base (Podman and Buildah build with `--from`), so every other step is still built and the image run
    (docs/contributing.md, "Building the image"). DEEPTHREAD_TEST_ENGINE and DEEPTHREAD_TEST_ENGINE_FLAGS
    adapt the engine to a sandbox (e.g. `podman --runtime runc`, `--ulimit nofile=20000:20000`)."""
    engine = shlex.split(os.environ.get("DEEPTHREAD_TEST_ENGINE", ""))
    build = [*engine, "bud" if engine[0] == "buildah" else "build"] if engine else builder()
    pull = [*engine, "pull"] if engine else puller()
    if build is None or pull is None:
        pytest.skip("no container engine here (Docker with a running daemon, Podman or Buildah)")
    flags = shlex.split(os.environ.get("DEEPTHREAD_TEST_ENGINE_FLAGS", ""))
    [base] = dockerfile_bases()
    stand_in = os.environ.get("DEEPTHREAD_TEST_BASE_IMAGE", "")
    if stand_in:
        from_base = ["--from", stand_in]
    else:
        pulled = subprocess.run([*pull, base], capture_output=True, text=True, timeout=PULL_SECONDS)
        if pulled.returncode != 0:
            error = (pulled.stderr.strip().splitlines() or ["(no output)"])[-1]
            pytest.skip(f"the base image cannot be pulled here, so the image cannot be built: `{' '.join(pull)} "
                        f"{base}` failed with: {error} (DEEPTHREAD_TEST_BASE_IMAGE names a local stand-in)")
        from_base = []
    tag = f"deepthread-test:{release()}"
    done = subprocess.run([*build, *flags, *from_base, "-t", tag, "-f", "Dockerfile", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=BUILD_SECONDS)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    runner = build[:-1]
    if runner[0] in ("docker", "podman"):  # Buildah builds but does not run images this way
        ran = subprocess.run([*runner, "run", "--rm", *flags, tag, "--version"], capture_output=True, text=True,
                             timeout=120)
        assert ran.returncode == 0 and ran.stdout.strip() == f"deepthread {release()}", ran.stdout + ran.stderr
        user = subprocess.run([*runner, "run", "--rm", *flags, "--entrypoint", "id", tag, "-u"], capture_output=True,
                              text=True, timeout=120)
        assert user.stdout.strip() not in ("", "0"), "the image runs unprivileged"
