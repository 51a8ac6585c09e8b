/** The Safety & tools tab: every layer's decision in detail, the tool calls, and recalled / written memories. */
import { clear, el } from "../dom";
import { summarize, type ToolCard, type TurnData, type TurnSummary } from "../state";
import type { ChatEvent } from "../types";
import { safetyRow, userText } from "./safety";
import { toolCard } from "./tools";

export class SafetyTab {
  readonly el = el("div", { class: "cf-safety-tab" });
  private drawn = "";
  /** The tool cards the user folded (they are open unless folded; a redraw keeps that). */
  private folded = new Set<string>();

  constructor() {
    this.el.addEventListener(
      "toggle",
      (ev) => {
        const card = ev.target as HTMLDetailsElement;
        const id = card.getAttribute?.("data-call-id");
        if (id) card.open ? this.folded.delete(id) : this.folded.add(id);
      },
      true, // (toggle does not bubble)
    );
  }

  clear(): void {
    this.drawn = "";
    clear(this.el);
  }

  /** Draws `turn`'s decisions, tool calls and memories (a no-op when none of its events changed). */
  show(turn: TurnData): void {
    const key = `${turn.turn_id}|${turn.lastSeq}|${turn.events.length}`;
    if (key === this.drawn) return;
    if (!this.drawn.startsWith(`${turn.turn_id}|`)) this.folded.clear(); // another turn
    this.drawn = key;
    clear(this.el);
    const s = summarize(turn.events);
    this.el.append(...safetySection(s), ...this.toolSection(s.tools), ...memorySection(turn.events));
  }

  /** The turn's tool cards, open unless the user folded them. */
  private toolSection(tools: ToolCard[]): HTMLElement[] {
    const cards = tools.map((card) => {
      const node = toolCard(card);
      node.setAttribute("data-testid", "tool-detail");
      if (!this.folded.has(card.call.call_id)) node.setAttribute("open", "");
      return node;
    });
    const empty = tools.length ? [] : [el("div", { class: "cf-empty", text: "No tools were called." })];
    return [el("div", { class: "cf-label", text: "Tool calls" }), ...empty, ...cards];
  }
}

/** Each layer's decision; first the user's text as the input layer saw it, when that layer marked spans in it. */
function safetySection(s: TurnSummary): HTMLElement[] {
  const out: HTMLElement[] = [el("div", { class: "cf-label", text: "Safety decisions" })];
  const redacted = s.safety.some((d) => d.layer === "input" && d.spans.length && d.action !== "allow");
  if (s.started && redacted)
    out.push(
      el("div", { class: "cf-muted", text: "User text as the input layer saw it:" }),
      userText(s.started.user, s.safety),
    );
  const list = el("div", { class: "cf-safety-list" }, ...s.safety.map(safetyRow));
  out.push(s.safety.length ? list : el("div", { class: "cf-empty", text: "No safety layer ran." }));
  return out;
}

/** The memories recalled for the turn (each snippet with its score) and those it wrote; nothing when none. */
function memorySection(events: readonly ChatEvent[]): HTMLElement[] {
  const out: HTMLElement[] = [];
  for (const e of events) {
    if (e.type === "memory_recalled") {
      out.push(el("div", { class: "cf-muted", text: `recalled ${e.snippets.length} for “${e.query}”` }));
      for (const sn of e.snippets) out.push(memoryRow(sn.score.toFixed(2), sn.text));
    } else if (e.type === "memory_written") out.push(memoryRow(e.operation, e.text));
  }
  return out.length ? [el("div", { class: "cf-label", text: "Memory" }), ...out] : [];
}

function memoryRow(pill: string, text: string): HTMLElement {
  return el("div", { class: "cf-mem" }, el("span", { class: "cf-pill", text: pill }), text);
}
