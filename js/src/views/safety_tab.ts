/** The Safety & tools tab: every layer's decision in detail, the tool calls, and recalled / written memories. */
import { clear, el } from "../dom";
import { summarize, type TurnData } from "../state";
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
    this.el.appendChild(el("div", { class: "cf-label", text: "Safety decisions" }));
    if (s.started) {
      const redacted = s.safety.some((d) => d.layer === "input" && d.spans.length && d.action !== "allow");
      if (redacted)
        this.el.append(
          el("div", { class: "cf-muted", text: "User text as the input layer saw it:" }),
          userText(s.started.user, s.safety),
        );
    }
    const list = el("div", { class: "cf-safety-list" });
    for (const d of s.safety) list.appendChild(safetyRow(d));
    this.el.appendChild(s.safety.length ? list : el("div", { class: "cf-empty", text: "No safety layer ran." }));
    this.el.appendChild(el("div", { class: "cf-label", text: "Tool calls" }));
    if (!s.tools.length) this.el.appendChild(el("div", { class: "cf-empty", text: "No tools were called." }));
    for (const card of s.tools) {
      const node = toolCard(card);
      node.setAttribute("data-testid", "tool-detail");
      if (!this.folded.has(card.call.call_id)) node.setAttribute("open", "");
      this.el.appendChild(node);
    }
    const memory = turn.events.filter((e) => e.type === "memory_recalled" || e.type === "memory_written");
    if (memory.length) {
      this.el.appendChild(el("div", { class: "cf-label", text: "Memory" }));
      for (const e of memory) {
        if (e.type === "memory_recalled") {
          this.el.appendChild(el("div", { class: "cf-muted", text: `recalled ${e.snippets.length} for “${e.query}”` }));
          for (const sn of e.snippets)
            this.el.appendChild(
              el("div", { class: "cf-mem" }, el("span", { class: "cf-pill", text: sn.score.toFixed(2) }), sn.text),
            );
        } else if (e.type === "memory_written") {
          this.el.appendChild(
            el("div", { class: "cf-mem" }, el("span", { class: "cf-pill", text: e.operation }), e.text),
          );
        }
      }
    }
  }
}
