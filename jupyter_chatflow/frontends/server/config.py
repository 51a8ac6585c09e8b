"""The server's settings: what `chatflow serve`'s flags set, checked once at start."""

from __future__ import annotations

import dataclasses
import ipaddress
import os

from jupyter_chatflow.engine.loader import DTYPES, WEIGHTS
from jupyter_chatflow.errors import ChatflowError

KEYS_VARIABLE = "CHATFLOW_API_KEYS"
"""Comma-separated API keys, added to those given with --api-key."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """How the server listens, whom it lets in and how much it takes."""

    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[str, ...] = ()
    """Bearer keys a request must carry; none: no key is asked (allowed on loopback only)."""
    rate_limit: int | None = None
    """Requests per minute per key; None: unlimited."""
    token_limit: int | None = None
    """Tokens (prompt + completion) per minute per key; None: unlimited."""
    max_batch: int = 8
    """Sequences the Scheduler decodes together (batched rows); the rest wait in its queue."""
    max_queue: int = 64
    """Requests waiting for the engine beyond which new ones get 503."""
    max_body_bytes: int = 1 << 20
    """A request body larger than this gets 413."""
    keepalive_s: float = 15.0
    """Seconds between SSE keep-alive comments (a queued stream gets them before its first token)."""
    idempotency_ttl_s: float = 24 * 3600
    """How long an answer stays stored for a retry with the same Idempotency-Key."""
    release_idle_s: float = 300.0
    """Seconds with nothing generating after which the server gives back its compiled programs and prompt cache
    (`runner.release_programs()`: 480 MiB after a 60 s soak of 16 clients on the default model,
    `docs/results.md`; the next request loads its programs from the XLA cache, ~1 s); 0: never."""
    model_name: str | None = None
    """The model id clients send and /v1/models lists (default: the model file's name without .gguf)."""
    dtype: str | None = None
    """What the weights are dequantized to (float32, bfloat16, float16; None: the backend's default)."""
    devices: int | None = None
    """Devices the weights and KV caches are spread over (`load_model(devices=N)`); None: one."""
    weights: str | None = None
    """How the weights are held: float, as-file or int8 (`load_model(weights=...)`); None: float."""

    def __post_init__(self) -> None:
        if not self.host.strip():
            raise ChatflowError("host cannot be empty: give an address to listen on, such as 127.0.0.1 (this machine "
                                "only) or 0.0.0.0 (every interface).")  # fmt: skip
        if not 1 <= self.port <= 65535:
            raise ChatflowError(f"port must be from 1 to 65535; got {self.port}")
        for name in ("max_batch", "max_queue", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ChatflowError(f"{name} must be at least 1; got {getattr(self, name)}")
        if self.release_idle_s < 0:
            raise ChatflowError(f"--release-idle-s must be 0 (never) or more; got {self.release_idle_s}")
        for name in ("rate_limit", "token_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ChatflowError(f"--{name.replace('_', '-')} must be at least 1 per minute; got {value}")
        if self.dtype not in (None, *DTYPES):
            raise ChatflowError(f"dtype must be float32, bfloat16 or float16 (or None for the backend's default); "
                                f"got {self.dtype!r}")  # fmt: skip
        if self.devices is not None and self.devices < 1:
            raise ChatflowError(f"devices must be at least 1; got {self.devices}")
        if self.weights not in (None, *WEIGHTS):
            raise ChatflowError(f"weights must be float, as-file or int8 (or None for float); got {self.weights!r}")
        if any(not key or key != key.strip() for key in self.api_keys):
            raise ChatflowError("An API key cannot be empty or start or end with a space.")
        check_exposure(self.host, self.api_keys)


def keys_from(flags: list[str] | None, environ: dict[str, str] | os._Environ[str] = os.environ) -> tuple[str, ...]:
    """The API keys: each --api-key, then the comma-separated ones in $CHATFLOW_API_KEYS (duplicates once)."""
    variable = [k.strip() for k in environ.get(KEYS_VARIABLE, "").split(",") if k.strip()]
    return tuple(dict.fromkeys([*(flags or []), *variable]))


def base_url(host: str, port: int) -> str:
    """The server's address as a URL: an IPv6 address in brackets (`http://[::1]:8000`), as URLs must spell it."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def is_loopback(host: str) -> bool:
    """True for localhost and the 127.0.0.0/8 and ::1 addresses; any other name or address reaches a network."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, api_keys: tuple[str, ...]) -> None:
    """Refuse to listen beyond loopback without a key: anyone on the network could use the model."""
    if not api_keys and not is_loopback(host):
        raise ChatflowError(
            f"Refusing to listen on {host} without an API key: anyone who reaches it could use the model. "
            f"Give --api-key KEY (or set {KEYS_VARIABLE}=KEY[,KEY…]), or listen on --host 127.0.0.1."
        )
