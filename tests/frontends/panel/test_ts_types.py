"""The panel's TypeScript types are generated from Python (the events from events.py, the protocol from
protocol.py), and the checked-in files are the current ones."""

from __future__ import annotations

import difflib
from typing import Any, Literal

import pytest

from jupyter_chatflow.events import EVENT_TYPES, Span
from jupyter_chatflow.frontends.panel import protocol
from jupyter_chatflow.frontends.panel.ts_types import (
    COMMAND,
    FOLDER,
    RENDERERS,
    WIDTH,
    comment,
    main,
    render,
    render_protocol,
    ts_type,
)
from jupyter_chatflow.settings import OPTIONS


@pytest.mark.parametrize("name", list(RENDERERS))
def test_the_checked_in_file_is_what_the_generator_writes_now(name):
    path = FOLDER / name
    expected, current = RENDERERS[name](), path.read_text() if path.exists() else ""
    if current != expected:
        diff = difflib.unified_diff(current.splitlines(), expected.splitlines(), "checked in", "generated", lineterm="")
        pytest.fail(
            f"js/src/{name} is out of date with the Python it is generated from: run `{COMMAND}` from the "
            "repository root and commit the file.\n" + "\n".join(list(diff)[:40])
        )


def test_every_event_is_an_interface_with_its_literal_type_and_in_the_union():
    text = render()
    for type_name, cls in EVENT_TYPES.items():
        assert f'export interface {cls.__name__} extends BaseEvent {{\n  type: "{type_name}";\n' in text
    union = text.split("export type ChatEvent =")[1].split(";")[0] + ";"
    assert [line.strip("| ;") for line in union.strip().splitlines()] == [c.__name__ for c in EVENT_TYPES.values()]


def test_fields_keep_their_python_types_names_and_docstrings():
    text = render()
    assert "export type SegmentKind = " in text and "  kind: SegmentKind;\n" in text
    assert "  finish_reason: FinishReason;\n" in text
    assert "  alternatives: Alternative[];\n" in text  # a dataclass from engine/generation.py
    assert "  spans: Span[];\n  reason: string;\n" in text
    assert "  /** Wall-clock time (Unix seconds). */\n  created: number;\n" in text
    assert "  params: Record<string, unknown>;\n" in text
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert text.startswith("// Generated from jupyter_chatflow/events.py") and COMMAND in text.splitlines()[2]


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (int, "number"),
        (float, "number"),
        (bool, "boolean"),
        (int | None, "number | null"),
        (tuple[int, ...], "number[]"),
        (tuple[int | None, ...], "(number | null)[]"),
        (tuple[int, str], "[number, string]"),
        (list[str], "string[]"),
        (dict[str, float], "Record<string, number>"),
        (dict[str, Any], "Record<string, unknown>"),
        (Literal["a", "b"], '"a" | "b"'),
        (tuple[Span, ...], "Span[]"),
    ],
)
def test_python_types_map_to_typescript(hint, expected):
    assert ts_type(hint, {Span: "Span"}, "Example.field") == expected


def test_a_type_with_no_typescript_form_names_the_field():
    with pytest.raises(TypeError, match=r"Example\.field: no TypeScript type for set\[int\]"):
        ts_type(set[int], {}, "Example.field")


def test_comments_fit_the_width_and_keep_paragraphs():
    assert comment("Short.", "  ") == ["  /** Short. */"]
    lines = comment(("word " * 40).strip() + "\n\nSecond paragraph.", "  ")
    assert lines[0] == "  /**" and lines[-1] == "   */"
    assert "   *" in lines and lines[-2] == "   * Second paragraph."
    assert all(len(line) <= WIDTH for line in lines)


def test_check_reports_a_stale_file_and_writing_fixes_it(tmp_path, capsys):
    (tmp_path / "events.generated.ts").write_text(render())
    (tmp_path / "protocol.generated.ts").write_text("// stale\n")
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert f"protocol.generated.ts is out of date: run {COMMAND}" in capsys.readouterr().out
    assert main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "protocol.generated.ts").read_text() == render_protocol()
    assert main(["--check", "--out", str(tmp_path)]) == 0


def test_the_settings_form_has_a_field_for_every_number_option_of_the_sampler():
    text = render_protocol().split("export const SETTING_FIELDS")[1].split("];")[0]
    for key in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_tokens", "seed"):
        assert f'key: "{key}"' in text
    assert 'key: "top_p",\n    label: "top p",\n    min: 0,\n    max: 1,\n    step: 0.05,\n' in text  # its range
    assert '{ key: "top_k", label: "top k", min: 0, step: 1, hint: "0 keeps all tokens", optional: false },' in text
    assert '"stop"' not in text and '"tools"' not in text  # lists are not number fields


def test_the_protocol_is_typescript_from_its_python_declarations():
    """Every message both ways, the traits, the rows, the settings and the model info, with their field types and
    docstrings; the events a message carries are imported from events.generated.ts, not declared again."""
    text = render_protocol()
    assert (
        'import type { AccountStatus, ChatEvent, SegmentKind, TrimStrategy, TurnAccount } from "./events.generated";'
        in text
    )
    for kind, cls in protocol.VIEW_MESSAGES.items():
        assert f"export interface {cls.__name__} {{\n" in text and f'  type: "{kind}";\n' in text
    view = text.split("export type ViewMessage =")[1].split(";")[0]
    assert [m.strip("| \n") for m in view.strip().splitlines()] == [c.__name__ for c in protocol.VIEW_MESSAGES.values()]
    kernel = text.split("export type KernelMessage =")[1].split(";")[0]
    assert "EventsMessage" in kernel and "RequestErrorMessage" in kernel
    assert "  events: ChatEvent[];\n  pieces: Pieces;\n  account: TurnAccount | null;\n" in text
    assert "export type Pieces = Record<string, [string, string]>;" in text
    assert "  rows_range?: [number, number] | null;\n" in text  # a view's message may leave it out
    assert "  rows_range: [number, number];\n" in text  # the kernel's reply always has it
    assert "  dtype?: string | null;\n" in text
    assert (
        "export interface TurnRow {" in text
        and "  events" not in text.split("export interface TurnRow {")[1].split("}")[0]
    )
    assert "  turns: TurnRow[];\n  live: LiveTurn | null;\n" in text and "  status: PanelStatus;\n" in text
    assert '  safety: "off" | "input" | "all";\n' in text and "  seed: number | null;\n" in text
    assert "  stop: string[];\n" in text and "  trim: TrimStrategy;\n" in text
    assert "export interface Prewarm {" in text and "  cached_before: number;\n" in text
    assert all(len(line) <= WIDTH for line in text.splitlines())


def test_the_traits_the_protocol_declares_are_the_widgets_synced_traits():
    from jupyter_chatflow.frontends.panel.widget import ChatWidget

    synced = set(ChatWidget.class_own_traits(sync=True))
    assert synced == set(protocol.PanelTraits.__annotations__)
    assert set(protocol.setting_types()) == {o.name for o in OPTIONS}
