"""Shared fixtures: a tiny random-weight GGUF model for fast tests, the real default model for integration.

Also the test tiers (README, "Run the tests"). Plain `pytest` runs the fast tier only (the tiny model, no browser),
on worker processes; `-m EXPR` picks tiers by marker (`-m slow`: the real model, the notebooks and the checks that
take seconds by nature; `-m browser`: the panel in Chromium) and `--all-tiers` runs everything (CI), both in one
process. A test in tests/integration, or one that asks for the real model's file, is `slow` whether or not it says so
(unless it is `browser`: the three tiers do not overlap).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from jupyter_chatflow.errors import ModelNotFoundError
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
# Tests do not write prepared-weight caches into the home folder; test_prepared.py turns it on in a tmp dir.
os.environ["CHATFLOW_WEIGHTS_CACHE"] = "off"
# Nor compile a first turn's programs while each model loads (tests/engine/test_ahead.py turns it on): a test's
# own compiles would share the cores with them, and most loads never run a first turn.
os.environ["CHATFLOW_COMPILE_AHEAD"] = "off"
# Nor do they touch the user's database (memories, sessions, the request log): one scratch file per test run.
os.environ["CHATFLOW_DB"] = os.path.join(tempfile.mkdtemp(prefix="chatflow-tests-"), "chatflow.db")


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory) -> Path:
    """A tiny random Llama (2 layers, dim 64, byte-level vocabulary) as a real GGUF file."""
    return write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_model(tiny_path):
    """The tiny model loaded through the public loader, float32."""
    from jupyter_chatflow import load_model

    return load_model(tiny_path, dtype="float32")


@pytest.fixture(scope="module")
def wide_model(tmp_path_factory):
    """The tiny model with a 4,096-token window (its byte-level vocabulary makes a tools prompt long); one per
    test module (its prompt cache is the module's)."""
    from jupyter_chatflow import load_model

    path = write_tiny_gguf(tmp_path_factory.mktemp("wide") / "wide.gguf", TinySpec(context_length=4096))
    return load_model(path, dtype="float32")


@pytest.fixture(scope="session")
def real_model_path() -> Path:
    """The default model's GGUF file (installed by the README's test command)."""
    from jupyter_chatflow.model.files import default_model_path

    try:
        return default_model_path()
    except ModelNotFoundError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def real_model(real_model_path):
    """SmolLM2-135M-Instruct, loaded once for the whole session."""
    from jupyter_chatflow import load_model

    return load_model(real_model_path)


@pytest.fixture(scope="session")
def greedy_reference() -> dict:
    """Hugging Face transformers float32 greedy outputs for three chat prompts (shared/reference)."""
    path = REFERENCE / "greedy_f32.json"
    if not path.exists():
        pytest.skip(f"reference outputs not found at {path}")
    return json.loads(path.read_text())


SLOW_TIERS = ("slow", "browser")  # the markers plain `pytest` leaves out
INTEGRATION = Path(__file__).resolve().parent / "integration"  # the real model, notebooks, the browser: all slow
FAST_TIMEOUT = 120  # seconds per fast test at most (the slowest takes ~10): a hang fails and shows its stacks
MAX_WORKERS = 4  # past a few workers, each one's start (importing JAX, collecting) outweighs its share of the tier


@pytest.hookimpl(trylast=True)  # (after the cache provider has made `config.cache`)
def pytest_configure(config: pytest.Config) -> None:
    """XLA's persistent compilation cache in pytest's cache folder (.pytest_cache/d/xla), never the user's: the
    workers of one run share what each compiled, and a second run loads its programs instead of compiling them."""
    if not os.environ.get("CHATFLOW_XLA_CACHE") and getattr(config, "cache", None) is not None:
        os.environ["CHATFLOW_XLA_CACHE"] = str(config.cache.mkdir("xla"))
    from jupyter_chatflow.engine.loader import enable_compilation_cache

    enable_compilation_cache()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all-tiers", action="store_true", help="run every tier: fast, slow (real model) and browser")


def fast_tier_only(config: pytest.Config) -> bool:
    """No `-m` and no `--all-tiers`: the slow and browser tiers are left out."""
    return not config.option.markexpr and not config.getoption("--all-tiers")


def whole_fast_tier(config: pytest.Config) -> bool:
    """Plain `pytest`: the fast tier over every test folder (no paths named)."""
    return fast_tier_only(config) and config.args_source is pytest.Config.ArgsSource.TESTPATHS


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (addopts): worker processes for plain `pytest` only; named paths, `-m` and `--all-tiers` run in
    this process (a few files do not repay the workers' start, and the slow tier's time budgets want the CPU)."""
    workers = min(MAX_WORKERS, os.cpu_count() or 1)
    return workers if whole_fast_tier(config) and workers > 1 else 0


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Plain `pytest` does not even import tests/integration (its notebook modules import nbclient: ~3 s)."""
    return True if collection_path == INTEGRATION and whole_fast_tier(config) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests in tests/integration and those that ask for the real model's file are `slow` (unless `browser`: the
    tiers do not overlap); without `-m` or `--all-tiers`, the slow and browser tiers are left out (deselected)."""
    for item in items:
        real = INTEGRATION in item.path.parents or "real_model_path" in getattr(item, "fixturenames", ())
        if real and not item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
        if not any(item.get_closest_marker(name) for name in (*SLOW_TIERS, "timeout")):
            item.add_marker(pytest.mark.timeout(FAST_TIMEOUT))
    if not fast_tier_only(config):
        return
    kept = [item for item in items if not any(item.get_closest_marker(name) for name in SLOW_TIERS)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("--all-tiers"):
        return "tiers: all (fast, slow, browser)"
    if config.option.markexpr:
        return f"tiers: -m {config.option.markexpr!r}"
    return "tiers: fast only (the others: -m slow, -m browser, --all-tiers; see the README)"


def tiny_spec(**changes) -> TinySpec:
    """A TinySpec with some fields changed."""
    return TinySpec(**changes)


@pytest.fixture(autouse=True)
def _no_default_model_in_fast_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast test never loads the real model through a safety policy bound to no model (`SafetyPolicy.bound`): it
    fails, naming the fix, rather than slowing the tier by seconds."""
    if any(request.node.get_closest_marker(name) for name in SLOW_TIERS):
        return
    from jupyter_chatflow.pipeline.safety import policy

    def refuse() -> None:
        raise AssertionError(
            "A fast test scanned with a SafetyPolicy bound to no model, which loads the default model: pass "
            "intent_probe=False (the rules alone), bind a model (with_model), or mark the test slow."
        )

    monkeypatch.setattr(policy, "default_intent", refuse)
