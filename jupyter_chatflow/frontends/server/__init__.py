"""`chatflow serve`: an OpenAI-compatible HTTP server over the engine (FastAPI + uvicorn, SSE, Prometheus).

>>> from jupyter_chatflow.frontends.server import ServerConfig, create_app
>>> app = create_app(ModelHost.ready(model), ServerConfig())   # serve it with uvicorn

Modules, one concern each: config.py (the flags' values), engine.py (what the server needs of the engine: the
shape of the batching Scheduler), host.py (the model as it loads), errors.py (OpenAI-shaped errors), auth.py (API
keys), limits.py (per-key rate limits), idempotency.py (stored answers), metrics.py (Prometheus), log.py (one JSON
line per request), requests.py (a chat completion's body, checked), tools.py (tools and tool_choice), formats.py
(response_format), pump.py (a generation's steps as OpenAI chunks, off the event loop), state.py (what the routes
share), completions.py (the route), conversation.py and conversations.py (the pipeline's own route: its turns as
delta-encoding v1 SSE, resumable), app.py (the routes and middleware), main.py (uvicorn), background.py (the
server on a thread of this process, for a notebook).
"""

from .app import create_app
from .background import BackgroundServer, serve_in_background
from .config import ServerConfig
from .host import ModelHost

__all__ = ["BackgroundServer", "ModelHost", "ServerConfig", "create_app", "serve_in_background"]
