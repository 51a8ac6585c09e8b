"""The panel's comm never routes a message to a kernel subshell that no longer exists (ipykernel >= 7.4)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from ipykernel.comm.comm import BaseComm

from jupyter_chatflow.frontends.panel.comm_route import route_to_live_subshells

needs_routing = pytest.mark.skipif(not hasattr(BaseComm, "_reply_subshell_for"), reason="ipykernel < 7.4")


class Manager:
    def __init__(self, *ids: str):
        self.ids = list(ids)

    def list_subshell(self) -> list[str]:
        return list(self.ids)


def comm_with(manager: Manager, last_reply_subshell: str | None) -> BaseComm:
    comm = BaseComm(comm_id="c1", primary=False)  # not opened: no kernel needed
    comm.kernel = SimpleNamespace(shell_channel_thread=SimpleNamespace(manager=manager))  # type: ignore[assignment]
    comm._reply_subshell_id = last_reply_subshell  # ipykernel's record of the subshell its last message answered
    return comm


@needs_routing
def test_a_message_routed_to_a_deleted_subshell_goes_to_the_one_it_names(caplog):
    comm = comm_with(Manager("new"), last_reply_subshell="deleted-on-reload")
    assert comm._reply_subshell_for({"method": "custom"}, "new") == "deleted-on-reload"  # ipykernel alone: dropped
    route_to_live_subshells(comm)
    with caplog.at_level(logging.WARNING):
        assert comm._reply_subshell_for({"method": "custom"}, "new") == "new"
        assert comm._reply_subshell_for({"method": "custom"}, "new") == "new"
    assert len([r for r in caplog.records if "no longer exists" in r.getMessage()]) == 1  # said once per comm


@needs_routing
def test_with_neither_subshell_alive_it_goes_to_the_main_shell():
    comm = comm_with(Manager(), last_reply_subshell="deleted-on-reload")
    route_to_live_subshells(comm)
    assert comm._reply_subshell_for({"method": "custom"}, "also-gone") is None


@needs_routing
def test_a_live_route_is_kept_as_ipykernel_chose_it():
    comm = comm_with(Manager("a", "b"), last_reply_subshell="a")
    route_to_live_subshells(comm)
    assert comm._reply_subshell_for({"method": "custom"}, "b") == "a"
    assert comm_with(Manager("a"), None)._reply_subshell_for({}, None) is None


def test_without_subshell_routing_nothing_changes():
    comm = SimpleNamespace()
    route_to_live_subshells(comm)
    assert not hasattr(comm, "_reply_subshell_for")
