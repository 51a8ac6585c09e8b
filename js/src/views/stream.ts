/**
 * The conversation: per turn the user's message (with redactions), the answer (rendered Markdown, or token chips
 * to inspect; tool cards where the stream paused), safety badges and a footer. Live events are appended in one
 * DocumentFragment per batch; the text view renders its current run of Markdown again once per batch.
 */
import { clear, el, fmtMs, visibleText } from "../dom";
import { renderMarkdown } from "../markdown";
import { blockOf, type Change, type Conversation, summarize, type TurnData } from "../state";
import type { ChatEvent, SafetyDecision, TokenDelta, ToolCall, ToolResult, TurnAccount, TurnRow } from "../types";
import { comparison, describeIntervention, intervenedOf } from "./compare";
import { lensShade, settledText } from "./lens";
import { safetyBadge, userText } from "./safety";
import { toolCard } from "./tools";

export interface StreamHooks {
  hoverToken(turnId: string, token: TokenDelta | null, chip: HTMLElement | null): void;
  clickToken(turnId: string, token: TokenDelta, chip: HTMLElement): void;
  selectTurn(turnId: string): void;
}

/** A token chip: its visible text; whitespace shown subtly; newline chips end the line; a token with no text of its
 * own (a character's first bytes) a mark to hover, never a chip 0 px wide. */
export function tokenChip(token: TokenDelta, turnId: string): HTMLElement {
  const p = Math.exp(token.logprob);
  const conf = p >= 0.5 ? "hi" : p >= 0.15 ? "mid" : "lo";
  const ws = /^\s+$/.test(token.text);
  const part = token.text === "" && !token.redacted; // the first bytes of a character the next token completes
  const chip = el("span", {
    class: `cf-tok cf-p-${conf}${token.redacted ? " cf-tok-redacted" : ""}${ws ? " cf-tok-ws" : ""}${part ? " cf-tok-part" : ""}`,
    "data-testid": "token",
    "data-turn": turnId,
    "data-index": token.index,
    title: part ? "The first bytes of a character (an emoji's, say): the next token completes it" : null,
    text: token.text.includes("\n") || ws ? visibleText(token.text) : token.text,
  });
  return chip;
}

type CardNodes = { call: ToolCall; result: ToolResult | null; nodes: [HTMLElement, HTMLElement]; after: number };

/** How answers are shown: rendered Markdown, or the tokens as chips (to inspect, fork). */
export type AnswerView = "text" | "tokens";

class TurnView {
  readonly el: HTMLElement;
  private user = el("div", { class: "cf-msg cf-msg-user" });
  private tokensBox = el("div", { class: "cf-answer-tokens" });
  private textBox = el("div", { class: "cf-answer-text", "data-testid": "answer-text" });
  private endBox = el("div", { class: "cf-answer-end" });
  private answer = el("div", { class: "cf-answer" }, this.tokensBox, this.textBox, this.endBox);
  private badges = el("div", { class: "cf-badges" });
  private footer = el("div", { class: "cf-turn-foot" });
  private note = el("div", { class: "cf-fork-note" });
  /** A turn answered again on a changed model: the two answers side by side (empty otherwise). */
  private compare = el("div", { class: "cf-compare-slot" });
  /** A turn a fork replaced: the index of the fork's token (its chips from there on are struck through); -1. */
  private replacedFrom = -1;
  tokens: TokenDelta[] = [];
  private cards = new Map<string, CardNodes>();
  /** The text view's current run of answer text (a tool card ends a run). */
  private run: { text: string; node: HTMLElement; drawn: string } | null = null;

  constructor(readonly turnId: string) {
    this.el = el(
      "div",
      { class: "cf-turn", "data-turn": turnId },
      this.note,
      this.user,
      this.compare,
      el("div", { class: "cf-msg cf-msg-bot" }, this.answer, this.footer),
      this.badges,
    );
  }

  rebuild(turn: TurnData): void {
    this.tokens = [];
    this.cards.clear();
    this.run = null;
    for (const box of [this.tokensBox, this.textBox, this.badges, this.user]) clear(box);
    this.append(turn, turn.events);
  }

  /** Appends new events (in sequence order) to what is drawn. */
  append(turn: TurnData, events: readonly ChatEvent[]): void {
    let frag = document.createDocumentFragment();
    const flush = () => {
      if (frag.childNodes.length) this.tokensBox.appendChild(frag);
      frag = document.createDocumentFragment();
    };
    for (const e of events) {
      if (e.type === "token") {
        this.tokens.push(e);
        const chip = frag.appendChild(tokenChip(e, this.turnId));
        if (this.replacedFrom >= 0 && e.index >= this.replacedFrom) chip.classList.add("cf-tok-replaced");
        if (e.text.includes("\n")) frag.appendChild(el("br"));
        this.addText(e.text);
      } else if (e.type === "tool_call") {
        flush();
        this.addCards(e);
      } else if (e.type === "tool_result") {
        this.settleCard(e);
      } else if (e.type === "safety_decision") {
        this.badges.appendChild(safetyBadge(e));
      }
    }
    flush();
    this.drawRun();
    this.refreshFrame(turn);
  }

  /** A tool call ends the text view's run of Markdown; its card goes into both views, to be filled in later. */
  private addCards(call: ToolCall): void {
    this.drawRun();
    this.run = null;
    const after = this.tokens.length;
    const card = () => toolCard({ call, result: null, afterTokens: after });
    const nodes: [HTMLElement, HTMLElement] = [card(), card()];
    this.cards.set(call.call_id, { call, result: null, nodes, after });
    this.tokensBox.appendChild(nodes[0]);
    this.textBox.appendChild(nodes[1]);
  }

  private addText(text: string): void {
    if (!this.run) {
      this.run = { text: "", node: el("div", { class: "cf-md" }), drawn: "" };
      this.textBox.appendChild(this.run.node);
    }
    this.run.text += text;
  }

  /** Renders the current run's Markdown again if it grew (once per batch of events). */
  private drawRun(): void {
    const run = this.run;
    if (!run || run.drawn === run.text) return;
    clear(run.node);
    run.node.appendChild(renderMarkdown(run.text));
    run.drawn = run.text;
  }

  /** A tool's result fills its cards in; a card the user opened stays open. */
  private settleCard(result: ToolResult): void {
    const card = this.cards.get(result.call_id);
    if (!card) return;
    const nodes = card.nodes.map((old) => {
      const node = toolCard({ call: card.call, result, afterTokens: card.after });
      if (old.hasAttribute("open")) node.setAttribute("open", "");
      old.replaceWith(node);
      return node;
    }) as [HTMLElement, HTMLElement];
    this.cards.set(result.call_id, { ...card, result, nodes });
  }

  /** The parts that depend on the whole turn: user text, block message, end note, footer. Cheap (no token work).
   * A finished turn whose events have not come yet is drawn from its row: the user's message and the figures. */
  refreshFrame(turn: TurnData): void {
    const summary = summarizeLight(turn.events);
    const waiting = turn.events.length === 0 && turn.row !== null;
    const user = summary.user ?? (waiting ? (turn.row?.user ?? null) : null);
    clear(this.user);
    if (user !== null) this.user.appendChild(userText(user, summary.safety));
    clear(this.endBox);
    const end = waiting ? fetching(this.unanswered) : this.endNote(summary);
    if (end) this.endBox.appendChild(end);
    const ended = ending(summary.terminal, turn.row);
    const figures = turn.account ?? turn.row;
    this.el.classList.toggle("cf-live", !ended);
    this.footer.textContent = footerText(figures, ended);
    this.footer.title = figures?.generated_note ?? "";
  }

  /** What XLA compiles while this turn is live ("" when nothing): shown under its answer. */
  compiling = "";

  /** Its events were asked for long ago and have not come (no kernel answers: a saved notebook, not running). */
  unanswered = false;

  /** Under the answer: the block message (nothing was said), [stopped], the error, what XLA is compiling while
   * the answer waits for it, or "thinking…" before a token. */
  private endNote({ block, terminal: t, finalText }: FrameSummary): HTMLElement | null {
    if (block && this.tokens.length === 0) {
      const badge = el("span", { class: "cf-badge cf-act-block", text: `blocked · ${block.layer}` });
      return el("div", { class: "cf-block-msg" }, badge, " ", block.replacement || finalText || "This was blocked.");
    }
    if (t?.type === "cancelled")
      return el("span", {
        class: "cf-end-note",
        "data-testid": "stopped",
        title: "Stopped (Stop, Ctrl-C or Kernel → Interrupt): the partial answer is kept",
        text: STOPPED,
      });
    if (t?.type === "error") return el("div", { class: "cf-end-note cf-end-error", text: `${t.error}: ${t.message}` });
    if (!t && this.compiling)
      return el("span", {
        class: "cf-end-note cf-thinking",
        "data-testid": "compiling",
        title:
          "XLA compiles each program the first time this process runs it (a new prompt or batch size); later turns reuse it",
        text: `XLA is compiling ${this.compiling}…`,
      });
    if (!t && this.tokens.length === 0 && !this.cards.size)
      return el("span", { class: "cf-end-note cf-thinking", text: "thinking…" });
    return null;
  }

  /** The line above a fork ("↪ forked from token N …") or above the turn it replaced, which is folded to that
   * line (a button unfolds it: the answer, its chips from token `replacedFrom` on struck through). */
  setNote(text: string, replacedFrom = -1): void {
    const superseded = replacedFrom >= 0;
    const toggle = superseded ? this.foldToggle() : null;
    this.note.replaceChildren(el("span", { text }), ...(toggle ? [" ", toggle] : []));
    this.note.hidden = !text;
    this.el.classList.toggle("cf-superseded", superseded);
    if (!superseded) this.el.classList.remove("cf-unfolded");
    if (replacedFrom !== this.replacedFrom) {
      this.replacedFrom = replacedFrom;
      for (const chip of this.tokensBox.querySelectorAll<HTMLElement>(".cf-tok"))
        chip.classList.toggle("cf-tok-replaced", superseded && Number(chip.dataset.index) >= replacedFrom);
    }
  }

  /** The comparison of this turn (answered again on a changed model) with the turn it replaces, drawn again from
   * both turns' events; null: none (its own answer shows as any turn's). */
  setComparison(box: HTMLElement | null): void {
    this.compare.replaceChildren(...(box ? [box] : []));
    this.el.classList.toggle("cf-compared", box !== null);
  }

  /** "show the replaced answer" / "hide it": folds and unfolds a turn a fork replaced. */
  private foldToggle(): HTMLElement {
    const button = el("button", { class: "cf-link", type: "button", "data-testid": "superseded-toggle" });
    const draw = () => {
      const open = this.el.classList.contains("cf-unfolded");
      button.textContent = open ? "hide it" : "show the replaced answer";
      button.setAttribute("aria-expanded", String(open));
    };
    button.addEventListener("click", () => {
      this.el.classList.toggle("cf-unfolded");
      draw();
    });
    draw();
    return button;
  }
}

/** The figures the footer shows: the account's, or (before the turn's events came) its row's. */
type Figures = Pick<TurnAccount, "answer_tokens" | "call_tokens" | "tokens_per_s" | "ttft_ms" | "generated_note">;

/** How a turn ended: its terminal event's type (and finish reason), else its row's (its events are still to come);
 * null while it is live. */
interface Ending {
  type: "completed" | "cancelled" | "error";
  finish_reason: string;
}

function ending(t: ChatEvent | null, row: TurnRow | null): Ending | null {
  if (t?.type === "completed") return { type: t.type, finish_reason: t.finish_reason };
  if (t?.type === "cancelled" || t?.type === "error") return { type: t.type, finish_reason: "" };
  if (!t && row && row.status !== "live") return { type: row.status, finish_reason: row.finish_reason };
  return null;
}

/** Under a finished turn whose events the view has asked for, until they come; or, when they did not come, why. */
function fetching(unanswered: boolean): HTMLElement {
  const text = unanswered
    ? "The kernel that holds this turn's tokens did not answer (is it running?): run the notebook to inspect the turn."
    : "fetching its events…";
  return el("span", { class: `cf-end-note${unanswered ? "" : " cf-thinking"}`, "data-testid": "fetching", text });
}

/** "12 answer tokens · 52.6 tok/s · first token 2.01 s · finish: stop", "… · stopped" or "… · generating…": the
 * account's figures (its generated_note, the footer's tooltip, names every token generated). */
function footerText(a: Figures | null, t: Ending | null): string {
  const n = a?.answer_tokens ?? 0;
  const bits: string[] = [`${n} answer token${n === 1 ? "" : "s"}`];
  if (a?.call_tokens) bits.push(`${a.call_tokens} in the tool call`);
  if (t?.type === "completed") {
    if (a?.tokens_per_s != null) bits.push(`${a.tokens_per_s.toFixed(1)} tok/s`);
    if (a?.ttft_ms != null) bits.push(`first token ${fmtMs(a.ttft_ms)}`); // null: no token came
    bits.push(`finish: ${t.finish_reason}`);
  } else if (t?.type === "cancelled") bits.push("stopped");
  else if (!t) bits.push("generating…");
  return bits.join(" · ");
}

/** The mark of a stopped answer, the same word as the magic's and the CLI's (the event's type stays `cancelled`). */
export const STOPPED = "[stopped]";

/** What the frame of a turn (user text, end note, footer) needs from its events. */
interface FrameSummary {
  user: string | null;
  safety: SafetyDecision[];
  terminal: ChatEvent | null;
  block: SafetyDecision | null;
  /** The terminal event's text ("" when none). */
  finalText: string;
}

function summarizeLight(events: readonly ChatEvent[]): FrameSummary {
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
  readonly el = el("div", { class: "cf-stream", "data-testid": "conversation", "data-view": "text" });
  private empty = el("div", {
    class: "cf-empty",
    text: "Ask something below. The answer streams in; switch to tokens to see each one as a chip — hover one to see what the sampler saw.",
  });
  private views = new Map<string, TurnView>();
  private conv: Conversation | null = null;
  /** Per turn with a lens: answer token index → the layer from which it was the top choice (-1: never). */
  private lensShades = new Map<string, { settled: Map<number, number>; layers: number }>();
  /** New text scrolls into view unless the user scrolled away from the bottom (decided by the user's scrolls
   * only: a layout that grows around them, e.g. a taller timeline beside the conversation, leaves them be). */
  private following = true;

  /** Shows answers as rendered text or as token chips (both are kept drawn: switching is instant). */
  setView(view: AnswerView): void {
    this.el.setAttribute("data-view", view);
  }

  constructor(private hooks: StreamHooks) {
    this.el.appendChild(this.empty);
    this.el.addEventListener("mouseover", (ev) => this.onPointer(ev, false));
    this.el.addEventListener("mouseout", (ev) => {
      const chip = (ev.target as HTMLElement).closest?.(".cf-tok");
      if (chip && !chip.contains(ev.relatedTarget as Node))
        this.hooks.hoverToken(chip.getAttribute("data-turn") ?? "", null, null);
    });
    this.el.addEventListener("click", (ev) => this.onPointer(ev, true));
    this.el.addEventListener("scroll", () => {
      this.following = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 40;
    });
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

  /** Shades the answers' chips by their lens (or not): the chips of the turns `setLens` gave. */
  setLensShading(on: boolean): void {
    this.el.setAttribute("data-lens", on ? "on" : "off");
  }

  /** A turn's lens: its chips carry their settled layer (`--cf-lens`, and a title that says it); null forgets it. */
  setLens(turnId: string, settled: Map<number, number> | null, layers: number): void {
    if (settled) this.lensShades.set(turnId, { settled, layers });
    else this.lensShades.delete(turnId);
    this.shade(turnId);
  }

  private shade(turnId: string): void {
    const view = this.views.get(turnId);
    if (!view) return;
    const lens = this.lensShades.get(turnId);
    for (const chip of view.el.querySelectorAll<HTMLElement>(".cf-tok")) {
      const settled = lens?.settled.get(Number(chip.dataset.index));
      if (!lens || settled === undefined) {
        chip.removeAttribute("data-lens");
        chip.style.removeProperty("--cf-lens");
        chip.classList.remove("cf-lens-never");
        continue;
      }
      const shade = lensShade(settled, lens.layers);
      chip.setAttribute("data-lens", String(settled));
      chip.style.setProperty("--cf-lens", Math.max(shade, 0).toFixed(3));
      chip.classList.toggle("cf-lens-never", shade < 0);
      if (!chip.classList.contains("cf-tok-part")) chip.title = `lens: ${settledText(settled, lens.layers)}`;
    }
  }

  /** Applies a change: new turns and out-of-order ones are drawn whole, in-order batches appended. */
  /** The kernel says what XLA compiles now: the live turn's end note shows it. */
  setCompiling(text: string): void {
    const id = this.conv?.liveId;
    const view = id ? this.views.get(id) : undefined;
    const turn = id ? this.conv?.turns.get(id) : undefined;
    for (const v of this.views.values()) v.compiling = v === view ? text : "";
    if (view && turn) view.refreshFrame(turn);
  }

  /** The turns still without events were asked for long ago: their notes say the kernel did not answer. */
  setUnanswered(): void {
    for (const [id, view] of this.views) {
      const turn = this.conv?.turns.get(id);
      if (!turn || turn.events.length) continue;
      view.unanswered = true;
      view.refreshFrame(turn);
    }
  }

  update(conv: Conversation, change: Change): void {
    this.conv = conv;
    for (const [id, events] of change.appended) {
      const turn = conv.turns.get(id);
      const view = this.views.get(id);
      if (turn && view) view.append(turn, events);
      else change.redraw.add(id);
      // a fork's note names the replaced token, which its turn_started event (in the first batch) carries
      if (turn?.fork_of && events.some((e) => e.type === "turn_started" || e.type === "intervened"))
        change.structure = true;
    }
    for (const id of change.figures) {
      const turn = conv.turns.get(id);
      if (turn && !change.redraw.has(id)) this.views.get(id)?.refreshFrame(turn);
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
    for (const id of [...change.redraw, ...change.appended.keys()]) if (this.lensShades.has(id)) this.shade(id);
    if (change.structure || change.redraw.size) this.layout(conv);
    else this.compareChanged(conv, [...change.appended.keys(), ...change.figures]);
    if (this.following) this.el.scrollTop = this.el.scrollHeight;
  }

  /** Puts the turn views in the conversation's order, moving only those out of place (a move resets nothing the
   * user set: open cards, scroll position). */
  private layout(conv: Conversation): void {
    const turns = conv.list();
    for (const id of [...this.views.keys()])
      if (!conv.turns.has(id)) {
        this.views.get(id)?.el.remove();
        this.views.delete(id);
      }
    const forks = new Map<string, TurnData>(); // a replaced turn's id → the fork that replaced it
    for (const turn of turns) if (turn.fork_of) forks.set(turn.fork_of, turn);
    this.answeredAgain = new Map(
      [...forks].filter(([, fork]) => intervenedOf(fork)).map(([parent, fork]) => [fork.turn_id, parent]),
    );
    let previous: Element = this.empty;
    if (this.empty.parentNode !== this.el) this.el.prepend(this.empty);
    for (const turn of turns) {
      const view = this.views.get(turn.turn_id);
      if (!view) continue;
      if (previous.nextElementSibling !== view.el) previous.after(view.el);
      previous = view.el;
      const original = turn.fork_of ? conv.turns.get(turn.fork_of) : undefined;
      const fork = forks.get(turn.turn_id);
      const change = intervenedOf(turn);
      const forkChange = intervenedOf(fork);
      const compared = this.drawComparison(turn, view, conv);
      if (forkChange) {
        view.setNote(
          `✕ replaced by the next turn, answered again with ${describeIntervention(forkChange)}: the two answers side by side below`,
        );
        continue;
      }
      const at = fork ? forkIndex(fork, turn) : "";
      const note =
        turn.fork_of && change
          ? compared
            ? ""
            : `↪ answered again with ${describeIntervention(change)} (for this turn only); it replaces the answer above`
          : turn.fork_of
            ? `↪ forked from token ${forkIndex(turn, original)}: the answer is kept up to it, then regenerated (it replaces the answer above)`
            : fork
              ? `✕ replaced by the fork from token ${at} (below): not in the conversation any more`
              : "";
      view.setNote(note, fork ? Number(at) || 0 : -1); // ("?": an older record's unknown index)
    }
    this.empty.hidden = turns.length > 0;
  }

  /** Turns answered again on a changed model, by id → the turn each replaces (from the last layout). */
  private answeredAgain = new Map<string, string>();

  /** A turn answered again, or the turn it replaces, got events: the notes and comparisons are drawn again. */
  private compareChanged(conv: Conversation, ids: string[]): void {
    const involved = new Set([...this.answeredAgain.keys(), ...this.answeredAgain.values()]);
    if (ids.some((id) => involved.has(id))) this.layout(conv);
  }

  /** The two answers side by side on the card of a turn answered again on a changed model (and its parent's events
   * came): nothing on any other card. */
  private drawComparison(turn: TurnData, view: TurnView, conv: Conversation): boolean {
    const change = intervenedOf(turn);
    const original = turn.fork_of ? conv.turns.get(turn.fork_of) : undefined;
    const box = change && original?.events.length ? comparison(original, turn, change) : null;
    view.setComparison(box);
    return box !== null;
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
