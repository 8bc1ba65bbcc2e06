"""A new operator's first commands: `--version`, `ask --out` to a folder that is not there, `doctor` on a
cloud provider with nothing set, and `doctor --live` with its libraries' chatter kept off the screen."""
from __future__ import annotations

import subprocess
import sys
import tomllib
import pytest

from tests.fakes.anthropic import text_reply
from tests.processes import DEEPTHREAD, ROOT, environment


def deepthread(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(DEEPTHREAD + list(args), env=environment(**env), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_version_names_the_installed_release() -> None:
    release = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    done = deepthread("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"deepthread {release}", done.stdout + done.stderr


@pytest.mark.parametrize(("out", "says"), [
    ("no/such/folder/report.md", "the folder no/such/folder does not exist; create it (mkdir -p no/such/folder)"),
    (".", "is a folder: name a file in it, e.g. --out report.md"),
])
def test_out_where_no_report_can_be_written_is_one_line_before_any_work(out: str, says: str, fake_model) -> None:
    done = deepthread("ask", "expense ratio of VTI", "--out", out, ANTHROPIC_API_KEY="k",
                      ANTHROPIC_BASE_URL=fake_model.url)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"--out {out}") and says in line, line
    assert fake_model.requests == [], "no model was asked"
    # Before the settings too: the first thing wrong is said first, whatever else is missing.
    assert says in deepthread("ask", "expense ratio of VTI", "--out", out).stderr


# Python's own way of saying a package is not installed: sys.modules[name] = None makes both
# `import name` and importlib.util.find_spec(name) report it missing.
WITHOUT_EXTRAS = ("import sys; sys.modules['botocore'] = None; sys.modules['google.auth'] = None; "
                  "from bot.cli.main import main; raise SystemExit(main(['doctor']))")


@pytest.mark.parametrize(("provider", "named"), [
    ("bedrock", ["DEEPTHREAD_MODEL_PROVIDER=bedrock needs boto3", "AWS_REGION is not set",
                 "DEEPTHREAD_MODEL is not set", "DEEPTHREAD_SMALL_MODEL is not set"]),
    ("vertex", ["DEEPTHREAD_MODEL_PROVIDER=vertex needs google-auth", "CLOUD_ML_REGION is not set",
                "ANTHROPIC_VERTEX_PROJECT_ID is not set", "DEEPTHREAD_MODEL is not set",
                "DEEPTHREAD_SMALL_MODEL is not set"]),
])
def test_doctor_names_every_missing_setting_of_a_cloud_at_once_extras_included(provider: str,
                                                                               named: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=environment(DEEPTHREAD_MODEL_PROVIDER=provider, SLACK_BOT_TOKEN="xoxb-1",
                                                       SLACK_SIGNING_SECRET="s", REDIS_URL="redis://127.0.0.1:1/0"))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith(("REDIS_URL", "note:"))]
    assert [next(line for line in lines if line.startswith(start)) for start in named] == [
        line for line in lines if line.startswith(tuple(named))], lines
    assert len(lines) == len(named), lines
    extra = f"pip install 'deepthread[{provider}]'"
    assert extra in lines[0]


def test_doctor_live_shows_lines_for_a_person_and_no_library_chatter(fake_slack, fake_model, redis_url) -> None:
    """ddgs logs each engine's failure at INFO; doctor --live printed them all before its own lines, and
    said the search failure in the words the model is given ("read pages you already have")."""
    fake_model.policy = lambda request: text_reply("p")
    done = deepthread("doctor", "--live", SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s",
                      SLACK_API_URL=f"{fake_slack.url}/api/", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url,
                      REDIS_URL=redis_url, DEEPTHREAD_SEARCH="duckduckgo",
                      DDGS_PROXY="http://127.0.0.1:9")  # every engine fails at once, offline
    output = done.stdout + done.stderr
    assert " INFO " not in output and "ddgs" not in output, output
    [search] = [line for line in done.stdout.splitlines() if line.startswith("DEEPTHREAD_SEARCH=")]
    assert search == "DEEPTHREAD_SEARCH=duckduckgo: DuckDuckGo is failing (server errors or unreachable)", search


def test_the_model_endpoint_is_named_when_doctor_live_cannot_reach_it(fake_slack, redis_url) -> None:
    done = deepthread("doctor", "--live", SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s",
                      SLACK_API_URL=f"{fake_slack.url}/api/", ANTHROPIC_API_KEY="k",
                      ANTHROPIC_BASE_URL="http://127.0.0.1:9", REDIS_URL=redis_url, DEEPTHREAD_SEARCH="searxng",
                      SEARXNG_URL="http://127.0.0.1:9")
    [model] = [line for line in done.stdout.splitlines() if "model service" in line]
    assert model.startswith("The model service at http://127.0.0.1:9/v1/messages could not be reached"), model
    assert model.endswith("check the network or ANTHROPIC_BASE_URL") and "APIConnectionError" not in model


def test_inspect_and_forget_find_the_redis_up_started_and_say_when_none_runs(tmp_path) -> None:
    """`deepthread up` picks a free port; while it runs its address is in the data directory for the commands
    that read runs (the Redis is started here as `up` starts it, with the data directory it would use)."""
    from bot.cli.local_redis import ADDRESS_FILE, LocalRedis
    from bot.settings import DATA_DIR_VARIABLE

    env = {DATA_DIR_VARIABLE: str(tmp_path)}
    with LocalRedis(data_dir=tmp_path) as up:
        assert (tmp_path / "redis" / ADDRESS_FILE).read_text().strip() == up.url
        forget = deepthread("forget", "--team", "T0TEAM", **env)
        inspect = deepthread("inspect", "r-none", **env)
    assert forget.returncode == 0, forget.stderr
    for done in (forget, inspect):
        assert f"Using the Redis of `deepthread up` at {up.url}" in done.stderr, done.stderr
        assert "REDIS_URL is not set" not in done.stderr
    assert not (tmp_path / "redis" / ADDRESS_FILE).exists(), "a stopped server's address is removed"
    done = deepthread("forget", "--team", "T0TEAM", **env)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"REDIS_URL is not set and no `deepthread up` is running with its data in {tmp_path}: point REDIS_URL at the "
        f"Redis the workers use, or start `deepthread up` (set {DATA_DIR_VARIABLE} if it keeps its data elsewhere)")


def test_scripts_up_says_how_to_reach_deepthread_when_it_is_not_on_the_path() -> None:
    venv = ROOT / ".venv" / "bin" / "deepthread"
    env = environment(PATH="/usr/bin:/bin")  # no .venv/bin: the usual fresh shell; `up` then stops for settings
    done = subprocess.run(["bash", "scripts/up"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr  # doctor's lines: nothing is configured
    [note] = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert f"`deepthread` is not on your PATH. Run the other commands as {venv}" in note
    assert "source .venv/bin/activate" in note and f"ln -s {venv} ~/.local/bin/deepthread" in note
    on_path = environment(PATH=f"{venv.parent}:/usr/bin:/bin")
    done = subprocess.run(["bash", "scripts/up"], env=on_path, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "not on your PATH" not in done.stderr
