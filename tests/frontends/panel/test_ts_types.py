"""The panel's TypeScript event types are generated from events.py, and the checked-in file is the current one."""

from __future__ import annotations

import difflib
from typing import Any, Literal

import pytest

from jupyter_chatflow.events import EVENT_TYPES, Span
from jupyter_chatflow.frontends.panel.ts_types import COMMAND, OUTPUT, WIDTH, comment, main, render, ts_type


def test_the_checked_in_file_is_what_the_generator_writes_now():
    expected, current = render(), OUTPUT.read_text() if OUTPUT.exists() else ""
    if current != expected:
        diff = difflib.unified_diff(current.splitlines(), expected.splitlines(), "checked in", "generated", lineterm="")
        pytest.fail(
            f"js/src/events.generated.ts is out of date with jupyter_chatflow/events.py: run `{COMMAND}` from the "
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
    out = tmp_path / "events.generated.ts"
    out.write_text("// stale\n")
    assert main(["--check", "--out", str(out)]) == 1
    assert COMMAND in capsys.readouterr().out
    assert main(["--out", str(out)]) == 0
    assert out.read_text() == render()
    assert main(["--check", "--out", str(out)]) == 0


def test_the_settings_form_has_a_field_for_every_number_option_of_the_sampler():
    text = render().split("export const SETTING_FIELDS")[1]
    for key in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_tokens", "seed"):
        assert f'key: "{key}"' in text
    assert 'key: "top_p",\n    label: "top p",\n    min: 0,\n    max: 1,\n    step: 0.05,\n' in text  # its range
    assert '{ key: "top_k", label: "top k", min: 0, step: 1, hint: "0 keeps all tokens", optional: false },' in text
    assert '"stop"' not in text and '"tools"' not in text  # lists are not number fields
