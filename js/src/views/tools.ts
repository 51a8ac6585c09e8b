/** A tool call card: name, arguments, output or error, latency (tool_call + tool_result matched by call_id). */
import { el, fmtMs } from "../dom";
import type { ToolCard } from "../state";
import type { CallGuard, ToolCall } from "../types";

/** Each string rule in words, as `account/calls.py` writes them for the cell's lines and the timeline. */
export const GUARD_WORDS: Record<Exclude<CallGuard, "">, string> = {
  unclosed: "a string argument ended where the model wrote the call's end inside it",
  repeat: "a string argument was closed when it kept repeating itself",
};

/** How the call's writing ended, in words ("" for a call the model closed itself): as `account/calls.py`'s. */
export function callNote(call: ToolCall): string {
  const said = call.cut ? [`cut at max_tokens after ${call.tokens} token${call.tokens === 1 ? "" : "s"}, not run`] : [];
  if (call.guard) said.push(GUARD_WORDS[call.guard]);
  return said.join("; ");
}

export function toolCard(card: ToolCard): HTMLElement {
  const { call, result } = card;
  const state = call.cut ? "cut" : !result ? "running" : result.error ? "error" : "ok";
  const latency = call.cut ? "not run" : result ? fmtMs(result.latency_ms) : "running…";
  return el(
    "details",
    { class: `cf-tool cf-tool-${state}`, "data-testid": "tool-card", "data-call-id": call.call_id },
    cardHead(card, latency),
    cardBody(card, latency),
  );
}

/** The summary line: the tool, its arguments and its output or error (each cut at 60 characters, else whole: they
 * wrap), how long it took. */
function cardHead({ call, result }: ToolCard, latency: string): HTMLElement {
  const outcome = call.cut ? "cut at max_tokens" : result ? result.error || result.output : "…";
  return el(
    "summary",
    { class: "cf-tool-head" },
    el("span", { class: "cf-tool-icon", "aria-hidden": "true", text: "ƒ" }),
    el("span", { class: "cf-tool-name", text: call.name }),
    el("code", { class: "cf-tool-args-inline", text: short(argumentsText(call)) }),
    el("span", { class: "cf-tool-arrow", text: "→" }),
    el("code", { class: "cf-tool-out-inline", text: short(outcome) }),
    el("span", { class: "cf-tool-latency", text: latency }),
  );
}

/** The unfolded card: the arguments as indented JSON (a cut call's as written), the whole output (or error), how
 * the call's writing ended when a limit or a rule ended it, the call's id. */
function cardBody({ call, result }: ToolCard, latency: string): HTMLElement {
  const note = callNote(call);
  const label = call.cut ? "arguments, as written before the cut" : "arguments";
  return el(
    "div",
    { class: "cf-tool-body" },
    el("div", { class: "cf-label", text: call.constrained ? `${label} (schema-constrained)` : label }),
    el("pre", { class: "cf-pre", text: call.cut ? call.arguments_text : JSON.stringify(call.arguments, null, 2) }),
    ...(note ? [el("div", { class: "cf-tool-note", "data-testid": "tool-note", text: note })] : []),
    ...(call.cut ? [] : outputRows(result)),
    el("div", { class: "cf-muted", text: `call ${call.call_id} · ${latency}` }),
  );
}

function outputRows(result: ToolCard["result"]): HTMLElement[] {
  return [
    el("div", { class: "cf-label", text: result?.error ? "error" : "output" }),
    el("pre", {
      class: `cf-pre${result?.error ? " cf-pre-error" : ""}`,
      text: result ? result.error || result.output : "(waiting)",
    }),
  ];
}

/** The arguments in one line: as written for a cut call (its JSON is unfinished), else as parsed. */
function argumentsText(call: ToolCall): string {
  return call.cut ? `${call.arguments_text}…` : JSON.stringify(call.arguments);
}

function short(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
