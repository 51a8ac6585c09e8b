"""Errors as OpenAI sends them: `{"error": {"message", "type", "param", "code"}}` with the HTTP status to match.

Handlers raise `APIError`; the app turns it (and anything unexpected, as a 500) into that body, so one bad request
never stops the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse


class APIError(Exception):
    """A request the server answers with an error; `message` says what to change."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The OpenAI-shaped error object."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        """The HTTP response for this error."""
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """400: the body or a parameter is wrong; `param` names the field."""
    return APIError(400, message, param=param, code=code)


def server_error(message: str) -> APIError:
    """500: the server failed; the request may be retried."""
    return APIError(500, message, type="server_error", code="internal_error")
