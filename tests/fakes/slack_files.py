"""Files shared in threads, for the fake Slack: `files.info` and the private download.

`share_file` posts a person's message carrying a file into a thread, as Slack stores it; the
message carries the full file object (a tombstone once the file is deleted), as on Slack.
`require_sign_in(fake)` makes every download answer that page (a token that may not download).
`files.info` answers with Slack's file object (`url_private_download` on the fake's origin,
under /files-pri/, as Slack serves them from files.slack.com/files-pri/…). The download needs
the bot token as a Bearer header and the `files:read` scope; without them Slack does not
answer 401/403 but redirects to its sign-in page, an HTML page served with 200, which is
what a client that forgets the header saves instead of the file. Registered on FakeSlack by
`register(fake, app)`.
"""
from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

SIGN_IN_PAGE = ("<!DOCTYPE html><html><head><title>Slack</title></head><body><h1>Sign in to Deepthread Test</h1>"
                "<form action='/signin'><input name='email'></form></body></html>")
FILETYPES = {"pdf": "pdf", "xlsx": "xlsx", "docx": "docx", "pptx": "pptx", "csv": "csv", "md": "markdown",
             "txt": "text", "html": "html", "png": "png", "zip": "zip"}


@dataclass
class SharedFile:
    id: str
    name: str
    content: bytes
    mimetype: str
    user: str
    channel: str
    ts: str
    deleted: bool = False
    external: bool = False  # a link to Google Drive etc.: no Slack download address
    # Shared from a conversation the bot is not a member of: the message shows it, but files.info
    # answers file_not_found for the bot's token (ASSUMED: Slack's docs do not spell this case out).
    not_member: bool = False
    thin: bool = False  # the message carries only the file's id (a client must ask files.info)


def _shared(fake: FakeSlack) -> dict[str, SharedFile]:
    return fake.__dict__.setdefault("shared_files", {})


def register(fake: FakeSlack, app: web.Application) -> None:
    fake._methods["files.info"] = lambda p: files_info(fake, p)

    async def download(request: web.Request) -> web.StreamResponse:
        return await _download(fake, request)

    app.router.add_get("/files-pri/{team_file}/{name}", download)
    app.router.add_get("/files-pri/{team_file}/download/{name}", download)
    app.router.add_get("/signin", _sign_in)


def share_file(fake: FakeSlack, channel: str, thread_ts: str, name: str, content: bytes, *, user: str = "UANA",
               text: str = "", mimetype: str | None = None, external: bool = False, not_member: bool = False,
               thin: bool = False) -> str:
    """A person shares a file in the thread (one message carrying it); returns the file id."""
    from tests.fakes.slack_records import SlackMessage

    with fake._lock:
        file_id = f"F{next(fake._file_counter):08d}"
        ts = fake._next_ts()
        kind = mimetype or mimetypes.guess_type(name)[0] or "application/octet-stream"
        _shared(fake)[file_id] = SharedFile(file_id, name, content, kind, user, channel, ts, external=external,
                                            not_member=not_member, thin=thin)
        fake._store(SlackMessage(channel=channel, ts=ts, text=text, thread_ts=thread_ts, user=user, files=[file_id]))
    return file_id


def attach_file(fake: FakeSlack, channel: str, ts: str, name: str, content: bytes, *, not_member: bool = False,
                thin: bool = False) -> str:
    """The message at `ts` (a mention, say) carries a file, as a message a person posts with one attached."""
    with fake._lock:
        file_id = f"F{next(fake._file_counter):08d}"
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        message = fake._messages[channel][ts]
        _shared(fake)[file_id] = SharedFile(file_id, name, content, kind, message.user, channel, ts,
                                            not_member=not_member, thin=thin)
        message.files.append(file_id)
    return file_id


def require_sign_in(fake: FakeSlack) -> None:
    """Every download answers Slack's sign-in page, as for a token that may not download files."""
    with fake._lock:
        fake.__dict__["downloads_need_sign_in"] = True


def delete_file(fake: FakeSlack, file_id: str) -> None:
    with fake._lock:
        _shared(fake)[file_id].deleted = True


def message_file(fake: FakeSlack, file_id: str) -> dict[str, Any]:
    """A file as a message carries it: the full file object, or a tombstone once deleted."""
    f = _shared(fake).get(file_id)
    if f is None:
        return {"id": file_id}  # a file the bot uploaded (files.upload_v2): the fake keeps it thin
    if f.deleted:
        return {"id": file_id, "mode": "tombstone"}
    if f.thin:
        return {"id": file_id}
    return _file_object(fake, f)


def files_info(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    from tests.fakes.slack_records import SlackError

    f = _shared(fake).get(str(p.get("file", "")))
    if f is None or f.deleted or f.not_member or fake.team_of_channel(f.channel) != fake._caller.team_id:
        raise SlackError("file_not_found")  # another workspace's file does not exist for this token
    return {"file": _file_object(fake, f)}


def _file_object(fake: FakeSlack, f: SharedFile) -> dict[str, Any]:
    extension = f.name.rsplit(".", 1)[-1].lower()
    obj: dict[str, Any] = {
        "id": f.id, "created": int(float(f.ts)), "timestamp": int(float(f.ts)), "name": f.name, "title": f.name,
        "mimetype": f.mimetype, "filetype": FILETYPES.get(extension, extension), "user": f.user,
        "size": len(f.content), "permalink": f"https://deepthread-test.slack.com/files/{f.user}/{f.id}/{f.name}",
        "mode": "external" if f.external else "hosted", "is_external": f.external,
        "channels": [f.channel] if f.channel.startswith("C") else [],
        "groups": [f.channel] if f.channel.startswith("G") else [],
    }
    if f.external:
        obj["url_private"] = f"https://docs.example.com/d/{f.id}"
    else:
        team = fake.team_of_channel(f.channel)
        obj["url_private"] = f"{fake._origin}/files-pri/{team}-{f.id}/{f.name}"
        obj["url_private_download"] = f"{fake._origin}/files-pri/{team}-{f.id}/download/{f.name}"
    return obj


async def _download(fake: FakeSlack, request: web.Request) -> web.StreamResponse:
    from tests.fakes.slack import _bearer
    from tests.fakes.slack_records import SlackError

    file_id = request.match_info["team_file"].split("-", 1)[-1]
    token = _bearer(request.headers.get("Authorization", ""))
    with fake._lock:
        downloads = fake.__dict__.setdefault("file_downloads", [])
        downloads.append((file_id, token))
        f = _shared(fake).get(file_id)
        allowed = (bool(token and token.startswith("xoxb-")) and "files:read" in fake.scopes
                   and not fake.__dict__.get("downloads_need_sign_in"))
        if allowed and f is not None:
            try:  # a token of another workspace (or a revoked one) is not signed in here
                acting = fake._workspace_of_token(str(token), {"channel": f.channel})
                allowed = acting.team_id == fake.team_of_channel(f.channel)
            except SlackError:
                allowed = False
    if not allowed:
        raise web.HTTPFound(f"/signin?redir=/files-pri/{request.match_info['team_file']}")
    if f is None or f.deleted:
        return web.Response(status=404, text="File not found", content_type="text/plain")
    return web.Response(body=f.content, content_type=f.mimetype,
                        headers={"Content-Disposition": f'attachment; filename="{f.name}"'})


async def _sign_in(_: web.Request) -> web.Response:
    return web.Response(text=SIGN_IN_PAGE, content_type="text/html")
