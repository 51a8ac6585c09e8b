/**
 * The conversation: per turn the user's message (with redactions), the answer as token chips (tool cards where
 * the stream paused), safety badges and a footer. Live events are appended in one DocumentFragment per batch.
 */
import { clear, el, fmtMs, visibleText } from "../dom";
import { type Conversation, type Change, type TurnData, summarize, blockOf } from "../state";
import type { ChatEvent, SafetyDecision, TokenDelta, ToolCall, ToolResult } from "../types";
import { safetyBadge, userText } from "./safety";
import { toolCard } from "./tools";

export interface StreamHooks {
  hoverToken(turnId: string, token: TokenDelta | null, chip: HTMLElement | null): void;
  clickToken(turnId: string, token: TokenDelta, chip: HTMLElement): void;
  selectTurn(turnId: string): void;
}

/** A token chip: its visible text; whitespace shown subtly; newline chips end the line. */
export function tokenChip(token: TokenDelta, turnId: string): HTMLElement {
  const p = Math.exp(token.logprob);
  const conf = p >= 0.5 ? "hi" : p >= 0.15 ? "mid" : "lo";
  const ws = /^\s+$/.test(token.text);
  const chip = el("span", {
    class: `cf-tok cf-p-${conf}${token.redacted ? " cf-tok-redacted" : ""}${ws ? " cf-tok-ws" : ""}`,
    "data-testid": "token",
    "data-turn": turnId,
    "data-index": token.index,
    text: token.text.includes("\n") || ws ? visibleText(token.text) : token.text,
  });
  return chip;
}

class TurnView {
  readonly el: HTMLElement;
  private user = el("div", { class: "cf-msg cf-msg-user" });
  private answer = el("div", { class: "cf-answer" });
  private badges = el("div", { class: "cf-badges" });
  private footer = el("div", { class: "cf-turn-foot" });
  private note = el("div", { class: "cf-fork-note" });
  tokens: TokenDelta[] = [];
  private cards = new Map<string, { call: ToolCall; result: ToolResult | null; node: HTMLElement; after: number }>();

  constructor(readonly turnId: string) {
    this.el = el("div", { class: "cf-turn", "data-turn": turnId }, this.note, this.user, el("div", { class: "cf-msg cf-msg-bot" }, this.answer, this.footer), this.badges);
  }

  rebuild(turn: TurnData): void {
    this.tokens = [];
    this.cards.clear();
    clear(this.answer);
    clear(this.badges);
    clear(this.user);
    this.append(turn, turn.events);
  }

  /** Appends new events (in sequence order) to what is drawn. */
  append(turn: TurnData, events: readonly ChatEvent[]): void {
    let frag = document.createDocumentFragment();
    const flush = () => {
      if (frag.childNodes.length) this.answer.appendChild(frag);
      frag = document.createDocumentFragment();
    };
    for (const e of events) {
      if (e.type === "token") {
        this.tokens.push(e);
        frag.appendChild(tokenChip(e, this.turnId));
        if (e.text.includes("\n")) frag.appendChild(el("br"));
      } else if (e.type === "tool_call") {
        flush();
        const card = { call: e, result: null, node: toolCard({ call: e, result: null, afterTokens: this.tokens.length }), after: this.tokens.length };
        this.cards.set(e.call_id, card);
        this.answer.appendChild(card.node);
      } else if (e.type === "tool_result") {
        const card = this.cards.get(e.call_id);
        if (card) {
          const node = toolCard({ call: card.call, result: e, afterTokens: card.after });
          card.node.replaceWith(node);
          this.cards.set(e.call_id, { ...card, result: e, node });
        }
      } else if (e.type === "safety_decision") {
        this.badges.appendChild(safetyBadge(e));
      }
    }
    flush();
    this.refreshFrame(turn);
  }

  /** The parts that depend on the whole turn: user text, block message, footer. Cheap (no token work). */
  refreshFrame(turn: TurnData): void {
    const summary = summarizeLight(turn.events);
    clear(this.user);
    if (summary.user !== null) this.user.appendChild(userText(summary.user, summary.safety));
    const block = summary.block;
    this.answer.querySelector(":scope > .cf-block-msg")?.remove();
    this.answer.querySelector(":scope > .cf-end-note")?.remove();
    if (block && this.tokens.length === 0) {
      this.answer.appendChild(el("div", { class: "cf-block-msg" }, el("span", { class: "cf-badge cf-act-block", text: `blocked · ${block.layer}` }), " ", block.replacement || summary.finalText || "This was blocked."));
    } else if (summary.terminal?.type === "cancelled") {
      this.answer.appendChild(el("span", { class: "cf-end-note", text: "stopped" }));
    } else if (summary.terminal?.type === "error") {
      this.answer.appendChild(el("div", { class: "cf-end-note cf-end-error", text: `${summary.terminal.error}: ${summary.terminal.message}` }));
    } else if (!summary.terminal && this.tokens.length === 0 && !this.cards.size) {
      this.answer.appendChild(el("span", { class: "cf-end-note cf-thinking", text: "thinking…" }));
    }
    this.el.classList.toggle("cf-live", !summary.terminal);
    clear(this.footer);
    const t = summary.terminal;
    const bits: string[] = [`${this.tokens.length} tokens`];
    if (t?.type === "completed") {
      if (t.tokens_per_s) bits.push(`${t.tokens_per_s.toFixed(1)} tok/s`);
      if (t.timings.ttft_ms !== undefined) bits.push(`TTFT ${fmtMs(t.timings.ttft_ms)}`);
      bits.push(`finish: ${t.finish_reason}`);
    } else if (!t) bits.push("generating…");
    this.footer.textContent = bits.join(" · ");
  }

  setNote(text: string, superseded: boolean): void {
    this.note.textContent = text;
    this.note.hidden = !text;
    this.el.classList.toggle("cf-superseded", superseded);
  }
}

function summarizeLight(events: readonly ChatEvent[]) {
  let user: string | null = null;
  const safety: SafetyDecision[] = [];
  let terminal: ChatEvent | null = null;
  for (const e of events) {
    if (e.type === "turn_started") user = e.user;
    else if (e.type === "safety_decision") safety.push(e);
    else if (e.type === "completed" || e.type === "cancelled" || e.type === "error") terminal = e;
  }
  const t = terminal as ChatEvent | null;
  const finalText = t && "text" in t ? t.text : "";
  return { user, safety, terminal: t, block: safety.find((d) => d.action === "block") ?? null, finalText };
}

/** The scrolling conversation. */
export class StreamView {
  readonly el = el("div", { class: "cf-stream", "data-testid": "conversation" });
  private empty = el("div", { class: "cf-empty", text: "Ask something below. Tokens stream in as chips — hover one to see what the sampler saw." });
  private views = new Map<string, TurnView>();

  constructor(private hooks: StreamHooks) {
    this.el.appendChild(this.empty);
    this.el.addEventListener("mouseover", (ev) => this.onPointer(ev, false));
    this.el.addEventListener("mouseout", (ev) => {
      const chip = (ev.target as HTMLElement).closest?.(".cf-tok");
      if (chip && !chip.contains(ev.relatedTarget as Node)) this.hooks.hoverToken(chip.getAttribute("data-turn") ?? "", null, null);
    });
    this.el.addEventListener("click", (ev) => this.onPointer(ev, true));
  }

  private onPointer(ev: Event, click: boolean): void {
    const target = ev.target as HTMLElement;
    const chip = target.closest?.(".cf-tok") as HTMLElement | null;
    const turnEl = target.closest?.(".cf-turn") as HTMLElement | null;
    if (click && turnEl) this.hooks.selectTurn(turnEl.getAttribute("data-turn") ?? "");
    if (!chip) return;
    const turnId = chip.getAttribute("data-turn") ?? "";
    const token = this.tokenAt(turnId, Number(chip.getAttribute("data-index")));
    if (!token) return;
    if (click) this.hooks.clickToken(turnId, token, chip);
    else this.hooks.hoverToken(turnId, token, chip);
  }

  tokenAt(turnId: string, index: number): TokenDelta | undefined {
    const tokens = this.views.get(turnId)?.tokens ?? [];
    return tokens[index]?.index === index ? tokens[index] : tokens.find((t) => t.index === index);
  }

  /** Applies a change: new turns and out-of-order ones are drawn whole, in-order batches appended. */
  update(conv: Conversation, change: Change): void {
    const stick = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 40;
    for (const [id, events] of change.appended) {
      const turn = conv.turns.get(id);
      const view = this.views.get(id);
      if (turn && view) view.append(turn, events);
      else change.redraw.add(id);
      // a fork's note names the replaced token, which its turn_started event (in the first batch) carries
      if (turn?.fork_of && events.some((e) => e.type === "turn_started")) change.structure = true;
    }
    for (const id of change.redraw) {
      const turn = conv.turns.get(id);
      if (!turn) continue;
      let view = this.views.get(id);
      if (!view) {
        view = new TurnView(id);
        this.views.set(id, view);
      }
      view.rebuild(turn);
    }
    if (change.structure || change.redraw.size) this.layout(conv);
    if (stick) this.el.scrollTop = this.el.scrollHeight;
  }

  private layout(conv: Conversation): void {
    const turns = conv.list();
    for (const id of [...this.views.keys()]) if (!conv.turns.has(id)) {
      this.views.get(id)?.el.remove();
      this.views.delete(id);
    }
    const superseded = conv.superseded();
    for (const turn of turns) {
      const view = this.views.get(turn.turn_id);
      if (!view) continue;
      this.el.appendChild(view.el); // appendChild moves: keeps the order
      const original = turn.fork_of ? conv.turns.get(turn.fork_of) : undefined;
      const note = turn.fork_of ? `↪ forked from token ${forkIndex(turn, original)}` : superseded.has(turn.turn_id) ? "superseded by a fork" : "";
      view.setNote(note, superseded.has(turn.turn_id));
    }
    this.empty.hidden = turns.length > 0;
    if (!turns.length) this.el.appendChild(this.empty);
  }

  clear(): void {
    for (const v of this.views.values()) v.el.remove();
    this.views.clear();
  }
}

/** The token index a fork replaced: as its turn_started event says, or (older records) the first position where
 * its tokens differ from the original's. */
export function forkIndex(fork: TurnData, original: TurnData | undefined): string {
  const started = fork.events.find((e) => e.type === "turn_started");
  if (started && started.type === "turn_started" && typeof started.fork_index === "number" && started.fork_index >= 0) {
    return String(started.fork_index);
  }
  const a = summarize(fork.events).tokens;
  if (!original) return a.length ? String(a[0].index) : "?";
  const b = summarize(original.events).tokens;
  let i = 0;
  while (i < a.length && i < b.length && a[i].token_id === b[i].token_id) i++;
  return String(a[i]?.index ?? i);
}

export { blockOf };
