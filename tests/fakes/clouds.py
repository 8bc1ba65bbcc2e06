"""The Messages API as AWS Bedrock and Google Vertex AI serve it, in front of the same fake model.

Point the SDK's own clients at the fake's URL (`AsyncAnthropicBedrock(base_url=fake.url, …)`,
`AsyncAnthropicVertex(base_url=fake.url + "/v1", …)`); each route checks the wire form its cloud
expects before the fake model (anthropic.py) answers:

- Bedrock: `POST /model/{model id}/invoke` or `/invoke-with-response-stream`; the model is in the
  path, never in the body; the body carries `anthropic_version` and no `stream`; the request is
  signed with SigV4 for service `bedrock` (the signature is recomputed here from the secret key
  and must match: 403 `InvalidSignatureException` otherwise, as AWS answers), or carries a Bedrock
  API key as a Bearer token. A stream answers in AWS's binary event-stream framing (each frame a
  `chunk` whose `bytes` are one Messages SSE event's JSON); errors are `{"message": …}` bodies
  with an `x-amzn-ErrorType` header.
- Vertex: `POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`
  or `:streamRawPredict` (SSE, as the first-party API), and `…/models/count-tokens:rawPredict`;
  a Google OAuth access token as Bearer; `anthropic_version` in the body, the model in the path.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from .anthropic import FakeAnthropic, _Failure

# Credentials the fake clouds accept (tests sign with these).
AWS_ACCESS_KEY = "AKIAFAKEDEEPTHREAD01"
AWS_SECRET_KEY = "fake-secret-key-for-sigv4-checks"
BEDROCK_API_KEY = "ABSKfakebedrockapikey"
VERTEX_TOKEN = "ya29.fake-vertex-access-token"
VERTEX_PROJECT = "deepthread-test"

_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


def add_cloud_routes(app: web.Application, fake: FakeAnthropic) -> None:
    bedrock, vertex = Bedrock(fake), Vertex(fake)
    app.router.add_post("/model/{model}/invoke", bedrock.invoke)
    app.router.add_post("/model/{model}/invoke-with-response-stream", bedrock.invoke)
    app.router.add_post("/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{action}", vertex.predict)


def _bedrock_error(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """AWS's error shape: the message in the body, the exception's name in a header."""
    names = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
             429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException",
             529: "ServiceUnavailableException"}
    special = {"invalid_signature": "InvalidSignatureException", "unrecognized_client": "UnrecognizedClientException",
               "missing_auth": "MissingAuthenticationTokenException"}
    name = special.get(error_type) or names.get(status, "InternalServerException")
    return web.json_response({"message": message}, status=status, headers={"x-amzn-ErrorType": name, **(headers or {})})


def _frame(payload: bytes, headers: dict[str, str]) -> bytes:
    """One AWS event-stream message: prelude (lengths + CRC), string headers, payload, CRC."""
    encoded = b"".join(len(k).to_bytes(1, "big") + k.encode() + b"\x07" + len(v).to_bytes(2, "big") + v.encode()
                       for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(encoded).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


class Bedrock:
    def __init__(self, fake: FakeAnthropic) -> None:
        self.fake = fake

    def _auth(self, request: web.Request, raw: bytes) -> web.Response | None:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            if header[len("Bearer "):] != BEDROCK_API_KEY:
                return _bedrock_error(403, "access_denied", "Invalid API Key format: Must start with pre-defined prefix")
            return None
        match = _SIGV4.match(header)
        if match is None or "X-Amz-Date" not in request.headers:
            return _bedrock_error(403, "missing_auth", "Missing Authentication Token")
        if match["service"] != "bedrock":
            return _bedrock_error(403, "invalid_signature", "Credential should be scoped to correct service: 'bedrock'.")
        if match["key"] != AWS_ACCESS_KEY:
            return _bedrock_error(403, "unrecognized_client", "The security token included in the request is invalid.")
        if match["signature"] != _expected_signature(request, raw, match):
            return _bedrock_error(403, "invalid_signature", "The request signature we calculated does not match the "
                                  "signature you provided. Check your AWS Secret Access Key and signing method.")
        return None

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        refused = self._auth(request, raw)
        if refused is not None:
            return refused
        try:
            body = json.loads(raw)
        except ValueError:
            return _bedrock_error(400, "invalid_request_error", "Malformed input request, please reformat your input")
        if not isinstance(body.get("anthropic_version"), str) or not body["anthropic_version"]:
            return _bedrock_error(400, "invalid_request_error", "Malformed input request: #: required key "
                                  "[anthropic_version] not found, please reformat your input and try again.")
        for key in ("model", "stream"):
            if key in body:
                return _bedrock_error(400, "invalid_request_error", f"Malformed input request: #: extraneous key "
                                      f"[{key}] is not permitted, please reformat your input and try again.")
        model = request.match_info["model"]
        stream = request.path.endswith("-with-response-stream")
        with self.fake._lock:
            self.fake.cloud_requests.append(("bedrock", request.path, dict(request.headers), body))
        return await self.fake.answer(request, {**body, "model": model}, stream=stream, error=_bedrock_error,
                                      streamer=self._stream, limit_headers=False)

    async def _stream(self, request: web.Request, message: dict[str, Any], failure: _Failure | None) -> web.StreamResponse:
        from .anthropic import stream_events

        resp = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream",
                                           "x-amzn-RequestId": "fake-request"})
        await resp.prepare(request)
        for event in stream_events(message, failure):
            payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode(), "p": "abcd"})
            await resp.write(_frame(payload.encode(), {":event-type": "chunk", ":content-type": "application/json",
                                                       ":message-type": "event"}))
        await resp.write_eof()
        return resp


def _expected_signature(request: web.Request, raw: bytes, match: re.Match[str]) -> str:
    """SigV4 recomputed from what arrived, with the secret the fake knows (botocore does the maths)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    signed = match["signed"].split(";")
    headers = {name: request.headers.get(name, "") for name in signed}
    aws = AWSRequest(method=request.method, url=f"http://{request.host}{request.raw_path}", headers=headers, data=raw)
    aws.context["timestamp"] = request.headers["X-Amz-Date"]
    token = request.headers.get("X-Amz-Security-Token")
    signer = SigV4Auth(Credentials(AWS_ACCESS_KEY, AWS_SECRET_KEY, token), "bedrock", match["region"])
    canonical = signer.canonical_request(aws)
    return str(signer.signature(signer.string_to_sign(aws, canonical), aws))


class Vertex:
    def __init__(self, fake: FakeAnthropic) -> None:
        self.fake = fake

    async def predict(self, request: web.Request) -> web.StreamResponse:
        from .anthropic import _error

        if request.headers.get("Authorization") != f"Bearer {VERTEX_TOKEN}":
            return web.json_response({"error": {"code": 401, "status": "UNAUTHENTICATED", "message":
                                                "Request had invalid authentication credentials."}}, status=401)
        if request.match_info["project"] != VERTEX_PROJECT:
            return web.json_response({"error": {"code": 403, "status": "PERMISSION_DENIED", "message":
                                                f"Permission denied on project {request.match_info['project']}"}},
                                     status=403)
        model, _, action = request.match_info["action"].rpartition(":")
        if action not in ("rawPredict", "streamRawPredict"):
            return _error(404, "not_found_error", f"Not Found: {request.path}")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "There was an error parsing the body of your request")
        if not isinstance(body.get("anthropic_version"), str) or not body["anthropic_version"]:
            return _error(400, "invalid_request_error", "anthropic_version: Field required")
        with self.fake._lock:
            self.fake.cloud_requests.append(("vertex", request.path, dict(request.headers), body))
        if model == "count-tokens":
            from .anthropic import _pieces, _tokens

            pieces, _ = _pieces(body)
            return web.json_response({"input_tokens": _tokens(sum(len(p) for p in pieces))})
        if "model" in body:
            return _error(400, "invalid_request_error", "model: Extra inputs are not permitted (the model is in the URL)")
        return await self.fake.answer(request, {**body, "model": model}, stream=action == "streamRawPredict",
                                      error=_vertex_error, limit_headers=False)


def _vertex_error(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """Vertex answers a quota past its limit in Google's form (429 RESOURCE_EXHAUSTED, no
    retry-after); the model's own errors pass through in Anthropic's."""
    from .anthropic import _error

    if status == 429:
        return web.json_response({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
                                            "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_"
                                            "per_base_model with base model: anthropic-claude. Please submit a quota "
                                            "increase request."}}, status=429, headers=headers or {})
    return _error(status, error_type, message, headers)
