/** The context window: a stacked bar by segment kind (plus what was trimmed), and the exact prompt's tokens. */
import { clear, el } from "../dom";
import { promptTokens, type Round, summarize, type TurnData, type TurnSummary } from "../state";
import type { ChatEvent, GaugePart, Pieces, RoundAccount, Segment, Trim } from "../types";
import { lensShade, settledText } from "./lens";
import { isRemote } from "./wire";

/** The lens over a turn's last prompt: per position, the model's next-token choice there, the layer from which it
 * was, and its probability (the `lens` reply's `prompt_*`). */
export interface PromptLens {
  top: readonly number[];
  settled: readonly number[];
  logprobs: ArrayLike<number>;
  layers: number;
  pieces: Pieces;
}

/** The account's gauge of a round as a stacked bar (widths in % of the window: the parts add up to it). */
export function contextBarElement(parts: readonly GaugePart[], window: number): HTMLElement {
  const bar = el("div", { class: "cf-ctx-bar", "data-testid": "context-bar", role: "img" });
  bar.setAttribute("aria-label", parts.map((p) => `${p.label} ${p.tokens}`).join(", "));
  const whole = Math.max(window, 1);
  for (const p of parts) {
    const share = (p.tokens / whole) * 100;
    const part = el("span", {
      class: `cf-ctx-part cf-kind-${p.kind}`,
      "data-kind": p.kind,
      "data-tokens": p.tokens,
      title: `${p.label}: ${p.tokens.toLocaleString()} tokens (${share.toFixed(1)} %)`,
    });
    part.style.width = `${share.toFixed(3)}%`;
    bar.appendChild(part);
  }
  return bar;
}

/** What a remote server said of the prompt's size: its usage's prompt_tokens, or that it reported none. */
export function remotePromptSize(terminal: ChatEvent | null): string {
  if (terminal?.type !== "completed" && terminal?.type !== "cancelled")
    return "Its size comes with the server's usage, when the answer ends.";
  const n = terminal.usage.prompt_tokens;
  return n === null
    ? "The server did not report the prompt's size (its stream carried no usage)."
    : `The server counted ${n.toLocaleString()} prompt tokens (its usage).`;
}

/** Before a turn has a context, where it is: why it has none (it ended first), or what comes before it. */
export function noContextText(summary: TurnSummary): { stage: string; text: string } {
  const input = summary.safety.find((d) => d.layer === "input");
  const end = summary.terminal;
  if (input?.action === "block")
    return { stage: "blocked", text: "No context was assembled: the input safety layer blocked the message." };
  if (end?.type === "cancelled")
    return { stage: "stopped", text: "The turn was stopped before its context was assembled." };
  if (end) return { stage: "ended", text: "The turn ended before its context was assembled (see its error)." };
  const next = " The context shows here as soon as it is assembled.";
  const checked = summary.started?.features.safety !== "off";
  if (!summary.started) return { stage: "queued", text: `The turn has not started yet.${next}` };
  if (checked && !input)
    return {
      stage: "input",
      text: `Assembling the context comes after the input safety layer has read the message (on a kernel's first turn, XLA compiles the model's programs for it first).${next}`,
    };
  return {
    stage: "assembling",
    text: `Assembling the context: the system prompt, the history, recalled memories and the message, fitted to the window.${next}`,
  };
}

export class ContextView {
  readonly el = el("div", { class: "cf-ctx" });
  private roundSelect = el("select", { class: "cf-select", "aria-label": "Prompt round" });
  private head = el("div", { class: "cf-row cf-ctx-head" });
  private body = el("div", { class: "cf-ctx-body" });
  private prompt = el("div", { class: "cf-prompt", "data-testid": "prompt-tokens" });
  private promptLabel = el("div", { class: "cf-label", text: "Exact prompt — coloured by where each token came from" });
  private chips: HTMLElement[] = [];
  private turn: TurnData | null = null;
  private round = -1; // -1: the last
  private drawnKey = "";
  /** How many of the drawn prompt's tokens had no piece yet (drawn as their ids). */
  private rawIds = 0;
  /** Per turn, the lens over its last prompt (while the answers' lens shading is on). */
  private lenses = new Map<string, PromptLens>();
  /** Whether the drawn prompt is its turn's last round's (the lens covers that one). */
  private lastRound = false;
  private lensNote = el("div", { class: "cf-muted cf-ctx-lens", "data-testid": "prompt-lens-note", hidden: true });

  constructor() {
    this.roundSelect.addEventListener("change", () => {
      this.round = Number(this.roundSelect.value);
      this.drawnKey = "";
      if (this.turn) this.show(this.turn);
    });
    this.el.append(this.head, this.body, this.promptLabel, this.lensNote, this.prompt);
  }

  /** Shows nothing (no turn, or a new session). */
  clear(): void {
    this.turn = null;
    this.drawnKey = "";
    this.chips = [];
    for (const node of [this.head, this.body, this.prompt]) clear(node);
  }

  /** Draws `turn` (a no-op when nothing it shows changed). */
  show(turn: TurnData): void {
    if (this.turn?.turn_id !== turn.turn_id) this.round = -1;
    this.turn = turn;
    const summary = summarize(turn.events);
    const rounds = summary.rounds;
    const index = this.round >= 0 && this.round < rounds.length ? this.round : rounds.length - 1;
    // (no tokens of a remote prompt here, nor of a prompt not yet tokenized)
    this.promptLabel.hidden = this.prompt.hidden = isRemote(turn.events) || !rounds[index]?.tokenized;
    const ended = summary.terminal ? 1 : 0; // (a remote turn's prompt size comes with its end)
    const counted = turn.account?.events ?? -1;
    // a prompt drawn before its tokens' pieces came (shown as ids) is drawn again when more pieces come
    const prompt = `${rounds[index]?.tokenized ? 1 : 0}|${this.rawIds ? Object.keys(turn.pieces).length : 0}`;
    const waiting = index < 0 ? noContextText(summary).stage : ""; // (where the turn is, until it has a context)
    const key = `${turn.turn_id}|${index}|${rounds.length}|${counted}|${ended}|${waiting}|${prompt}`;
    if (key === this.drawnKey) return;
    const promptChanged =
      !this.drawnKey.startsWith(`${turn.turn_id}|${index}|`) || !this.drawnKey.endsWith(`|${prompt}`);
    this.drawnKey = key;
    clear(this.head);
    clear(this.body);
    if (index < 0) {
      this.drawNoContext(summary);
      return;
    }
    this.fillRounds(rounds.length, index);
    const figures = turn.account?.rounds[index] ?? null;
    this.drawHead(rounds[index], figures);
    this.drawBar(rounds[index], figures);
    this.lastRound = index === rounds.length - 1;
    if (promptChanged) this.drawPrompt(turn, rounds[index]);
    this.applyLens();
  }

  private drawNoContext(summary: TurnSummary): void {
    const remote = this.turn && isRemote(this.turn.events);
    const text = remote
      ? `The remote server does not provide the prompt's tokens: its tokenizer and chat template are on the server. The messages sent are in the Wire tab. ${remotePromptSize(summary.terminal)}`
      : noContextText(summary).text;
    this.body.appendChild(el("div", { class: "cf-empty", "data-testid": "context-waiting", text }));
    clear(this.prompt);
    this.chips = [];
  }

  /** The round picker: one option per prompt the turn assembled (hidden when there was one). */
  private fillRounds(count: number, index: number): void {
    clear(this.roundSelect);
    for (let i = 0; i < count; i++)
      this.roundSelect.appendChild(
        el("option", { value: i, text: `round ${i + 1} of ${count}`, selected: i === index }),
      );
    this.roundSelect.hidden = count < 2;
  }

  /** "121 / 8,192 tokens", the prompt and the round's output, the reserve, the strategy; its prefills. */
  private drawHead(round: Round, figures: RoundAccount | null): void {
    const a = round.assembled;
    if (!figures) {
      this.head.append(el("span", { class: "cf-muted", text: "…" }), this.roundSelect);
      return;
    }
    const output = figures.call_tokens ? `tool call ${figures.call_tokens}` : `answer ${figures.answer_tokens}`;
    const used = `${figures.used_tokens.toLocaleString()} / ${figures.window.toLocaleString()} tokens`;
    this.head.append(
      el("span", { class: "cf-strong", "data-testid": "context-used", text: used }),
      el("span", {
        class: "cf-muted",
        text: `prompt ${figures.context_tokens} · ${output} · reserved for the output ${figures.reserved_output} · strategy ${a.strategy}`,
      }),
      this.roundSelect,
    );
    if (figures.prefill_note)
      this.head.appendChild(
        el("div", { class: "cf-muted cf-ctx-prefill", "data-testid": "prefill-note", text: figures.prefill_note }),
      );
  }

  private drawBar(round: Round, figures: RoundAccount | null): void {
    const a = round.assembled;
    if (figures) this.body.append(contextBarElement(figures.gauge, figures.window), legend(figures.gauge));
    if (a.trimmed.length) this.body.append(trimStrip(a.trimmed, a.window), trimList(a.trimmed));
    this.body.appendChild(segmentList(a.segments));
  }

  private drawPrompt(turn: TurnData, round: Round): void {
    clear(this.prompt);
    this.chips = [];
    this.rawIds = round.tokenized?.ids.filter((id) => turn.pieces[String(id)] === undefined).length ?? 0;
    if (!round.tokenized) return;
    const frag = document.createDocumentFragment();
    for (const t of promptTokens(round.tokenized, round.assembled, turn.pieces)) {
      const newline = !t.special && t.text.includes("\n");
      const chip = el("span", {
        class: `cf-ptok cf-kind-${t.kind}${t.special ? " cf-special" : ""}${newline ? " cf-nl" : ""}`,
        title: `#${t.position} · id ${t.id}${t.hex ? ` · ${t.hex}` : ""} · ${round.assembled.segments[t.segment]?.label ?? t.kind}`,
        text: newline ? t.text.replace(/\n/g, "↵") : t.text,
      });
      this.chips.push(chip);
      frag.appendChild(chip);
      if (newline) frag.appendChild(el("br"));
    }
    this.prompt.appendChild(frag);
  }

  /** The lens over a turn's last prompt (null: none, or the shading is off): its tokens are shaded by the layer
   * from which the model's next-token choice after each was settled, and say what it was. */
  setPromptLens(turnId: string, lens: PromptLens | null): void {
    if (lens) this.lenses.set(turnId, lens);
    else this.lenses.delete(turnId);
    if (this.turn?.turn_id === turnId) this.applyLens();
  }

  private applyLens(): void {
    const lens = this.turn ? this.lenses.get(this.turn.turn_id) : undefined;
    const on = !!lens && this.lastRound && lens.top.length === this.chips.length;
    this.prompt.classList.toggle("cf-lensed", on);
    this.lensNote.hidden = !on;
    this.lensNote.textContent = on
      ? "Lens on the prompt: each token is shaded by the layer from which the model's choice for the next token there was its top choice through the last layer (darker: earlier); hover one for what it predicted."
      : "";
    this.chips.forEach((chip, i) => {
      chip.dataset.title ??= chip.title;
      if (!on || !lens) {
        chip.removeAttribute("data-lens");
        chip.style.removeProperty("--cf-lens");
        chip.title = chip.dataset.title;
        return;
      }
      const next = lens.pieces[String(lens.top[i])]?.[0] ?? `#${lens.top[i]}`;
      const p = `${(Math.exp(lens.logprobs[i]) * 100).toFixed(1)} %`;
      chip.setAttribute("data-lens", String(lens.settled[i]));
      chip.style.setProperty("--cf-lens", Math.max(lensShade(lens.settled[i], lens.layers), 0).toFixed(3));
      chip.title = `${chip.dataset.title}\nnext: “${next}” ${p}, ${settledText(lens.settled[i], lens.layers)}`;
    });
  }

  /** Shades the prompt's tokens by one query row's attention weights (null clears). `weights[i]` is position i. */
  shade(weights: ArrayLike<number> | null): void {
    let max = 0;
    if (weights) for (let i = 0; i < Math.min(weights.length, this.chips.length); i++) max = Math.max(max, weights[i]);
    this.prompt.classList.toggle("cf-shading", !!weights);
    this.chips.forEach((chip, i) => {
      const w = weights && max > 0 && i < weights.length ? Math.sqrt(weights[i] / max) : 0;
      chip.style.setProperty("--cf-att", weights ? w.toFixed(3) : "");
    });
  }
}

/** A swatch, label and token count per part of the bar. */
function legend(parts: readonly GaugePart[]): HTMLElement {
  const items = parts.map((p) =>
    el(
      "span",
      { class: "cf-legend-item" },
      el("span", { class: `cf-swatch cf-kind-${p.kind}` }),
      el("span", { text: p.label }),
      el("span", { class: "cf-muted", text: p.tokens.toLocaleString() }),
    ),
  );
  return el("div", { class: "cf-legend" }, ...items);
}

/** A strip as wide as the trimmed tokens' share of the window (at most all of it), and their count. */
function trimStrip(trimmed: Trim[], windowTokens: number): HTMLElement {
  const tokens = trimmed.reduce((n, t) => n + t.tokens, 0);
  const block = el("span", { class: "cf-trim-block" });
  block.style.width = `${Math.min(100, (tokens / Math.max(windowTokens, 1)) * 100).toFixed(3)}%`;
  return el(
    "div",
    { class: "cf-trim-bar", title: `${tokens} tokens left out` },
    block,
    el("span", { class: "cf-muted", text: `${tokens.toLocaleString()} tokens trimmed to fit` }),
  );
}

/** What was trimmed: each piece's action, label, size and why. */
function trimList(trimmed: Trim[]): HTMLElement {
  const items = trimmed.map((t) =>
    el(
      "li",
      {},
      el("span", { class: `cf-pill cf-trim-${t.action}`, text: t.action }),
      el("span", { class: "cf-strong", text: t.label }),
      el("span", { class: "cf-muted", text: `${t.tokens} tokens — ${t.reason}` }),
    ),
  );
  return el("ul", { class: "cf-trim-list", "data-testid": "trimmed" }, ...items);
}

/** One collapsible entry per segment of the prompt, its text inside. */
function segmentList(segments: Segment[]): HTMLElement {
  const items = segments.map((s, i) => {
    const summary = el(
      "summary",
      {},
      el("span", { class: `cf-swatch cf-kind-${s.kind}` }),
      el("span", { text: s.label }),
      el("span", { class: "cf-muted", text: `${s.tokens} tokens` }),
    );
    const item = el("details", { class: "cf-seg" }, summary);
    if (s.text) item.appendChild(el("pre", { class: "cf-pre", text: s.text }));
    item.setAttribute("data-segment", String(i));
    return item;
  });
  return el("div", { class: "cf-seg-list" }, ...items);
}
