/** Safety decisions: a badge per layer, their details, and the user's text with the input layer's spans marked. */
import { el, fmtMs } from "../dom";
import type { SafetyDecision } from "../types";

const ICON: Record<string, string> = { allow: "✓", flag: "!", redact: "▬", block: "✕" };

/** A compact badge: layer + action word, details in its tooltip and an expandable panel. */
export function safetyBadge(d: SafetyDecision): HTMLElement {
  const tip = [
    `${layerName(d)} · ${d.action} (${d.guard})`,
    d.reason,
    d.categories.length ? `categories: ${d.categories.join(", ")}` : "",
    Object.keys(d.scores).length ? `scores: ${scoresText(d.scores)}` : "",
    `latency: ${latencyText(d)}`,
  ]
    .filter(Boolean)
    .join("\n");
  return el(
    "span",
    {
      class: `cf-badge cf-act-${d.action}`,
      "data-testid": "safety-badge",
      "data-layer": d.layer,
      "data-subject": d.subject || null,
      "data-action": d.action,
      title: tip,
      tabindex: 0,
    },
    el("span", { class: "cf-badge-icon", "aria-hidden": "true", text: ICON[d.action] ?? "•" }),
    el("span", { class: "cf-badge-layer", text: layerName(d) }),
    el("span", { class: "cf-badge-action", text: d.action }),
  );
}

/** "2.61 s", and how much of it XLA compiled (a guard's pass over the model, on a cold turn). */
function latencyText(d: SafetyDecision): string {
  return d.compile_ms >= 1
    ? `${fmtMs(d.latency_ms)} (${fmtMs(d.compile_ms)} of it XLA compiling)`
    : fmtMs(d.latency_ms);
}

/** The layer, and what it read when it reads two things: "tool arguments", "tool result". */
export function layerName(d: SafetyDecision): string {
  return d.subject ? `${d.layer} ${d.subject}` : d.layer;
}

function scoresText(scores: Record<string, number>): string {
  return Object.entries(scores)
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .join(", ");
}

/** A row of details for the Safety tab. */
export function safetyRow(d: SafetyDecision): HTMLElement {
  const badge = safetyBadge(d);
  badge.removeAttribute("data-testid");
  return el(
    "div",
    { class: "cf-safety-row" },
    badge,
    el("span", { class: "cf-safety-reason", text: d.reason || "—" }),
    el("span", { class: "cf-safety-lat", text: fmtMs(d.latency_ms) }),
    el(
      "span",
      { class: "cf-safety-meta" },
      el("span", { class: "cf-safety-guard", text: `guard ${d.guard}` }),
      d.categories.length ? el("span", { class: "cf-safety-cats", text: d.categories.join(", ") }) : null,
      Object.keys(d.scores).length ? el("span", { class: "cf-safety-scores", text: scoresText(d.scores) }) : null,
      d.compile_ms >= 1
        ? el("span", { class: "cf-safety-compile", text: `${fmtMs(d.compile_ms)} of it XLA compiling` })
        : null,
    ),
  );
}

/** What a span's layer did to it: a redaction (struck through, its replacement after it: the model read the
 * replacement), a block (struck through: the model read nothing), or a flag (marked: the model read it as written).
 * A merged decision may hold a flagged guard's spans beside a redacting one's: only a span with a replacement was
 * redacted. */
export function spanAction(action: string, replacement: string): "redact" | "block" | "flag" {
  if (action === "block") return "block";
  return action === "redact" && replacement ? "redact" : "flag";
}

const SPAN_TITLE = {
  redact: "redacted: the model read the replacement",
  block: "blocked: the model read nothing of the message",
  flag: "flagged: the model read it as written",
};

/** The user's message with the input layer's spans shown: a redaction or a block struck through (a redaction's
 * replacement after it), a flagged span marked. */
export function userText(text: string, decisions: readonly SafetyDecision[]): HTMLElement {
  const spans = decisions
    .filter((d) => d.layer === "input" && d.action !== "allow")
    .flatMap((d) => d.spans.map((s) => ({ ...s, action: spanAction(d.action, s.replacement) })))
    .sort((a, b) => a.start - b.start);
  const out = el("div", { class: "cf-user-text" });
  let at = 0;
  for (const s of spans) {
    if (s.start < at) continue; // overlapping span: the first wins
    out.append(text.slice(at, s.start));
    const mark = el("span", {
      class: `cf-span cf-span-${s.action}`,
      "data-testid": "user-span",
      "data-action": s.action,
      title: `${s.category}: ${SPAN_TITLE[s.action]}`,
    });
    const original = text.slice(s.start, s.end);
    mark.append(el(s.action === "flag" ? "mark" : "del", { class: "cf-span-orig", text: original }));
    if (s.action === "redact") mark.append(el("ins", { class: "cf-span-repl", text: s.replacement }));
    mark.append(el("span", { class: "cf-span-cat", text: s.category }));
    out.append(mark);
    at = s.end;
  }
  out.append(text.slice(at));
  return out;
}
