"""`chatflow serve`'s settings: keys from flags and the environment, and no network exposure without one."""

from __future__ import annotations

import pytest

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.frontends.cli import build_parser, main
from jupyter_chatflow.frontends.server.config import ServerConfig, base_url, is_loopback, keys_from


def test_the_flags_as_the_issue_spells_them():
    args = build_parser().parse_args(["serve", "--api-key", "a", "--api-key", "b", "--rate-limit", "60",
                                      "--token-limit", "9000", "--max-batch", "4", "--model", "m.gguf"])  # fmt: skip
    assert (args.host, args.port, args.api_key, args.rate_limit, args.token_limit, args.max_batch, args.model) == (
        "127.0.0.1", 8000, ["a", "b"], 60, 9000, 4, "m.gguf")  # fmt: skip
    defaults = build_parser().parse_args(["serve"])
    assert (defaults.max_batch, defaults.api_key, defaults.rate_limit) == (8, None, None)


def test_devices_and_weights_flags_reach_the_config(monkeypatch):
    from jupyter_chatflow.frontends.server import main as server_main

    args = build_parser().parse_args(["serve", "--devices", "4", "--weights", "int8", "--dtype", "bfloat16"])
    assert (args.devices, args.weights, args.dtype) == (4, "int8", "bfloat16")
    given = []
    monkeypatch.setattr(server_main, "serve", lambda config, path: given.append(config))
    assert main(["serve", "--devices", "4", "--weights", "int8"]) == 0
    assert (given[0].devices, given[0].weights) == (4, "int8")
    defaults = build_parser().parse_args(["serve"])
    assert (defaults.devices, defaults.weights) == (None, None)


@pytest.mark.parametrize(("field", "value"), [("devices", 0), ("weights", "q4")])
def test_bad_devices_or_weights_are_refused(field, value):
    with pytest.raises(ChatflowError, match=field):
        ServerConfig(**{field: value})


def test_keys_come_from_the_flags_and_the_environment():
    assert keys_from(["a"], {"CHATFLOW_API_KEYS": "b, c,,a"}) == ("a", "b", "c")
    assert keys_from(None, {}) == ()


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.8.0.1", True), ("localhost", True),
                                                ("::1", True), ("0.0.0.0", False), ("192.168.1.5", False),
                                                ("example.org", False)])  # fmt: skip
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_it_refuses_to_listen_beyond_loopback_without_a_key():
    with pytest.raises(ChatflowError, match="--api-key KEY"):
        ServerConfig(host="0.0.0.0")
    assert ServerConfig(host="0.0.0.0", api_keys=("k",)).host == "0.0.0.0"


def test_the_command_says_how_to_fix_it(capsys, monkeypatch):
    monkeypatch.delenv("CHATFLOW_API_KEYS", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 1
    error = capsys.readouterr().err
    assert "Refusing to listen on 0.0.0.0" in error and "CHATFLOW_API_KEYS" in error and "--host 127.0.0.1" in error


def test_limits_must_be_positive():
    with pytest.raises(ChatflowError, match="--rate-limit"):
        ServerConfig(rate_limit=0)


@pytest.mark.parametrize("port", ["70000", "0", "-1", "http"])
def test_a_port_outside_1_to_65535_is_an_argparse_error_naming_the_flag(capsys, port):
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["serve", "--port", port])
    assert exit.value.code == 2
    assert f"argument --port: must be a whole number from 1 to 65535; got '{port}'" in capsys.readouterr().err
    assert build_parser().parse_args(["serve", "--port", "65535"]).port == 65535
    with pytest.raises(ChatflowError, match="port must be from 1 to 65535; got 70000"):
        ServerConfig(port=70000)


@pytest.mark.parametrize("host", ["", "  "])
def test_an_empty_host_is_refused_with_what_to_give_instead(capsys, host):
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["serve", "--host", host])
    assert exit.value.code == 2
    error = capsys.readouterr().err
    assert "argument --host: must name an address to listen on, such as 127.0.0.1" in error and "0.0.0.0" in error
    with pytest.raises(ChatflowError, match="host cannot be empty"):
        ServerConfig(host=host, api_keys=("k",))


def test_the_banner_writes_an_ipv6_address_in_brackets(capsys, monkeypatch):
    from jupyter_chatflow.frontends.server import main as server_main

    served = []
    monkeypatch.setattr(server_main, "serve", lambda config, model: served.append(config))
    assert main(["serve", "--host", "::1", "--port", "8123"]) == 0
    assert "chatflow serve: http://[::1]:8123/v1 (GET /health" in capsys.readouterr().err
    assert served[0].host == "::1" and served[0].port == 8123
    assert base_url("127.0.0.1", 8000) == "http://127.0.0.1:8000" and base_url("[::1]", 80) == "http://[::1]:80"
