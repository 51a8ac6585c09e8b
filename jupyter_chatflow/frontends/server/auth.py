"""API keys: `Authorization: Bearer KEY` checked against the configured keys; logs see only a hash of the key."""

from __future__ import annotations

import hashlib
import hmac

from .errors import APIError

ANONYMOUS = "anonymous"
"""The key id of requests to a server that asks for no key."""


def key_id(key: str) -> str:
    """A short, stable, non-reversible name for a key (what logs and rate limits use; never the key)."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


class Keys:
    """The keys a server accepts; with none, every request is let in as `ANONYMOUS`."""

    def __init__(self, keys: tuple[str, ...]):
        self._keys = tuple(k.encode() for k in keys)

    @property
    def required(self) -> bool:
        """Whether requests must carry a key."""
        return bool(self._keys)

    def check(self, authorization: str | None) -> str:
        """The key id of a request's Authorization header; 401 when a key is needed and missing or wrong."""
        if not self._keys:
            return ANONYMOUS
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise _unauthorized("No API key given: send the header 'Authorization: Bearer KEY'.")
        candidate = given.strip().encode()
        if not any(hmac.compare_digest(candidate, key) for key in self._keys):
            raise _unauthorized("Incorrect API key: check the key, or ask whoever runs the server for one.")
        return key_id(candidate.decode())


def _unauthorized(message: str) -> APIError:
    return APIError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
