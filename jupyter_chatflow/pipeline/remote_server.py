"""Where a remote chat's turns go: the server's base URL, the key (never shown) and the model it serves."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from jupyter_chatflow.errors import ChatflowError

from .wire import mask_key

if TYPE_CHECKING:
    import httpx

KEY_VARIABLES = ("CHATFLOW_API_KEY", "OPENAI_API_KEY")
"""Where a remote chat finds its key when none is passed, in this order."""


class RemoteServer:
    """Where a chat's turns go: an OpenAI-compatible server's base URL, the key and the model it serves.

    `base_url` is the API's root, as the `openai` client takes it (`http://host:8000/v1`; a bare
    `http://host:8000` gets `/v1`). Without `api_key`, `$CHATFLOW_API_KEY` or `$OPENAI_API_KEY` is used (our server
    asks for none on loopback). Without `model`, the first one `GET /v1/models` lists."""

    def __init__(self, base_url: str, api_key: str | None = None, model: str | None = None, timeout: float = 60.0):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ChatflowError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        root = base_url.rstrip("/")
        self.base_url = root if root.split("://", 1)[1].count("/") else f"{root}/v1"
        self.model = model
        self.timeout = timeout
        self._key = (
            api_key if api_key is not None else next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        )
        self._client: httpx.Client | None = None

    def __repr__(self) -> str:
        key = mask_key(self._key) if self._key else None
        return f"RemoteServer({self.base_url!r}, api_key={key!r}, model={self.model!r})"

    @property
    def client(self) -> httpx.Client:
        """One connection pool for the chat's requests (made on first use)."""
        import httpx

        if self._client is None:
            self._client = httpx.Client(timeout=httpx.Timeout(self.timeout, connect=5.0))
        return self._client

    def headers(self, *, stream: bool = True) -> dict[str, str]:
        """The request headers; the key goes only here, never into an event (see `wire.shown_headers`)."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json"}
        return headers | ({"Authorization": f"Bearer {self._key}"} if self._key else {})

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
