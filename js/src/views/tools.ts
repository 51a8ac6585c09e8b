/** A tool call card: name, arguments, output or error, latency (tool_call + tool_result matched by call_id). */
import { el, fmtMs } from "../dom";
import type { ToolCard } from "../state";

export function toolCard(card: ToolCard): HTMLElement {
  const { call, result } = card;
  const state = !result ? "running" : result.error ? "error" : "ok";
  const latency = result ? fmtMs(result.latency_ms) : "running…";
  return el(
    "details",
    { class: `cf-tool cf-tool-${state}`, "data-testid": "tool-card", "data-call-id": call.call_id },
    cardHead(card, latency),
    cardBody(card, latency),
  );
}

/** The one-line summary: the tool, its arguments (cut at 60 characters), its output or error, how long it took. */
function cardHead({ call, result }: ToolCard, latency: string): HTMLElement {
  return el(
    "summary",
    { class: "cf-tool-head" },
    el("span", { class: "cf-tool-icon", "aria-hidden": "true", text: "ƒ" }),
    el("span", { class: "cf-tool-name", text: call.name }),
    el("code", { class: "cf-tool-args-inline", text: inlineArgs(call.arguments) }),
    el("span", { class: "cf-tool-arrow", text: "→" }),
    el("code", { class: "cf-tool-out-inline", text: result ? result.error || result.output : "…" }),
    el("span", { class: "cf-tool-latency", text: latency }),
  );
}

/** The unfolded card: the arguments as indented JSON, the whole output (or error), the call's id. */
function cardBody({ call, result }: ToolCard, latency: string): HTMLElement {
  return el(
    "div",
    { class: "cf-tool-body" },
    el("div", { class: "cf-label", text: call.constrained ? "arguments (schema-constrained)" : "arguments" }),
    el("pre", { class: "cf-pre", text: JSON.stringify(call.arguments, null, 2) }),
    el("div", { class: "cf-label", text: result?.error ? "error" : "output" }),
    el("pre", {
      class: `cf-pre${result?.error ? " cf-pre-error" : ""}`,
      text: result ? result.error || result.output : "(waiting)",
    }),
    el("div", { class: "cf-muted", text: `call ${call.call_id} · ${latency}` }),
  );
}

function inlineArgs(args: Record<string, unknown>): string {
  const text = JSON.stringify(args);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
