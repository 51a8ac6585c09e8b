/**
 * The turn's timeline, like a browser's Network tab: the account's stages (jupyter_chatflow/account/timeline.py),
 * a bar each on one time axis from the request's submission. XLA compiling is drawn inside the bar of the stage it
 * delayed, a decode bar has a tick per token when it was computed, and a dashed line marks where the first token
 * was shown. Every figure here is the account's: nothing is recomputed from the events.
 */
import { clear, el, fmtMs } from "../dom";
import type { TurnData } from "../state";
import type { Stage, TurnAccount } from "../types";

const LEGEND: [string, string][] = [
  ["queue", "wait"],
  ["safety", "safety"],
  ["context", "context"],
  ["prefill", "prefill"],
  ["decode", "decode (ticks: tokens, when computed)"],
  ["tool", "tool"],
  ["title", "title"],
  ["http", "HTTP (ticks: SSE frames)"],
];

export class TimelineView {
  readonly el = el("div", { class: "cf-tl", "data-testid": "timeline" });
  private drawn = "";

  clear(): void {
    this.drawn = "";
    clear(this.el);
  }

  /** Draws `turn`'s timeline from its account (a no-op when the account did not change). */
  show(turn: TurnData): void {
    const a = turn.account;
    const key = `${turn.turn_id}|${a?.events ?? -1}|${a?.status ?? ""}`;
    if (key === this.drawn) return;
    this.drawn = key;
    clear(this.el);
    if (!a?.stages.length) {
      this.el.appendChild(el("div", { class: "cf-empty", text: "No stages yet." }));
      return;
    }
    this.el.append(stats(a), ...notes(a), grid(a), legend(a));
  }
}

function stats(a: TurnAccount): HTMLElement {
  const live = a.status === "live";
  const compile = a.remote ? "on the server" : fmtMs(a.compile_ms);
  const items = [
    stat("first token", a.ttft_ms !== null ? fmtMs(a.ttft_ms) : live ? "…" : "–", "ttft", a.ttft_note),
    stat(
      "tokens/s",
      a.tokens_per_s !== null ? a.tokens_per_s.toFixed(1) : live ? "…" : "–",
      "tps",
      a.tokens_per_s_note,
    ),
    stat("queued", fmtMs(a.queued_ms), "queued", "the waits drawn as wait bars"),
    stat(compileName(a), compile, "compile", "XLA compiling programs new to this process, inside the bars it delayed"),
    stat("answer", a.answer_ms !== null ? fmtMs(a.answer_ms) : "…", "answer", "from Send to the answer's end"),
    a.title_after_ms > 0 ? stat("title, after the answer", `+${fmtMs(a.title_after_ms)}`, "title", a.title_note) : null,
    live ? el("span", { class: "cf-pill cf-pill-live", text: "live" }) : null,
  ];
  return el("div", { class: "cf-row cf-tl-stats" }, ...items);
}

/** "XLA compile", and how much of it came before the first token was shown. */
function compileName(a: TurnAccount): string {
  if (a.remote || a.compile_ms < 1) return "XLA compile";
  if (a.compile_before_first_ms >= a.compile_ms - 0.5) return "XLA compile, all before the first token";
  if (a.compile_before_first_ms < 1) return "XLA compile, after the first token";
  return `XLA compile, ${fmtMs(a.compile_before_first_ms)} before the first token`;
}

/** The sentences that say what the figures are made of: the first token's time, the prewarm. */
function notes(a: TurnAccount): HTMLElement[] {
  const lines: [string, string][] = [
    [a.ttft_note, "ttft-note"],
    [a.prewarm_note, "prewarm-note"],
  ];
  return lines
    .filter(([text]) => text)
    .map(([text, id]) => el("div", { class: "cf-muted cf-tl-note", "data-testid": id, text }));
}

function grid(a: TurnAccount): HTMLElement {
  const span = Math.max(a.total_ms, 1e-3);
  const marks = ticks(span / 1000);
  const width = Math.max(span, marks[marks.length - 1] * 1000);
  const pct = (ms: number) => `${((ms / width) * 100).toFixed(3)}%`;
  const axis = el("div", { class: "cf-tl-axis" });
  for (const t of marks) {
    const tick = el("span", { class: "cf-tl-tick", text: tickText(t, marks[1] ?? 1) });
    tick.style.left = pct(t * 1000);
    axis.appendChild(tick);
  }
  const box = el("div", { class: "cf-tl-grid", "data-testid": "waterfall" });
  box.append(
    el("span", { class: "cf-tl-label cf-muted", text: "stage" }),
    axis,
    el("span", { class: "cf-tl-dur cf-muted", text: "took" }),
  );
  for (const s of a.stages) box.append(...row(s, pct, a.ttft_ms));
  return box;
}

function row(s: Stage, pct: (ms: number) => string, ttft: number | null): HTMLElement[] {
  const took = fmtMs(s.end_ms - s.start_ms);
  const tip = `${s.label}: ${fmtMs(s.start_ms)} → ${fmtMs(s.end_ms)} (${took})\n${s.detail}`;
  const label = el(
    "span",
    { class: "cf-tl-label", title: tip },
    el("span", { class: "cf-tl-name", text: s.label }),
    el("span", { class: "cf-tl-detail cf-muted", text: s.detail }),
  );
  return [label, track(s, pct, ttft, tip), el("span", { class: "cf-tl-dur", text: took, title: tip })];
}

/** The stage's bar (at least 2 px wide) with its compiling inside it, a tick per token, the first-token line. */
function track(s: Stage, pct: (ms: number) => string, ttft: number | null, tip: string): HTMLElement {
  const bar = span(`cf-tl-bar cf-tl-${s.kind}`, s.start_ms, s.end_ms, pct, { "data-kind": s.kind });
  const compiles = s.compiles.map((c) =>
    span("cf-tl-bar cf-tl-compile", c.start_ms, c.end_ms, pct, { "data-kind": "compile" }),
  );
  const tokenTicks = s.ticks_ms.map((t) => mark("cf-tl-tok", pct(t)));
  const first = ttft === null ? null : mark("cf-tl-ttft", pct(ttft));
  return el("div", { class: "cf-tl-track", title: tip }, bar, ...compiles, ...tokenTicks, first);
}

/** A bar from `start` to `end` (ms), at least 2 px wide. */
function span(
  cls: string,
  start: number,
  end: number,
  pct: (ms: number) => string,
  attrs: Record<string, string>,
): HTMLElement {
  const node = el("span", { class: cls, "data-start": start.toFixed(3), "data-end": end.toFixed(3), ...attrs });
  node.style.left = pct(start);
  node.style.width = `max(2px, calc(${pct(end)} - ${pct(start)}))`;
  return node;
}

/** A mark on a track, `left` from its start. */
function mark(cls: string, left: string): HTMLElement {
  const node = el("span", { class: cls });
  node.style.left = left;
  return node;
}

function legend(a: TurnAccount): HTMLElement {
  const kinds = LEGEND.filter(([kind]) => a.stages.some((s) => s.kind === kind));
  const compiled = a.stages.some((s) => s.compiles.length);
  return el(
    "div",
    { class: "cf-legend" },
    ...kinds.map(([kind, text]) => item(`cf-tl-${kind}`, text)),
    compiled ? item("cf-tl-compile", "XLA compile (inside the bar it delayed)") : null,
    a.ttft_ms !== null ? item("cf-tl-ttft-key", "first token shown") : null,
  );
}

function item(cls: string, text: string): HTMLElement {
  return el("span", { class: "cf-legend-item" }, el("span", { class: `cf-swatch ${cls}` }), el("span", { text }));
}

function stat(name: string, value: string, id: string, tip = ""): HTMLElement {
  return el(
    "span",
    { class: "cf-stat", "data-testid": `stat-${id}`, title: tip || null },
    el("span", { class: "cf-stat-value", text: value }),
    el("span", { class: "cf-stat-name", text: name }),
  );
}

/** An axis label: "0", "250 ms", "2 s", "1.5 s" (as many decimals as the step needs). */
function tickText(t: number, step: number): string {
  if (t === 0) return "0";
  if (step < 1) return `${Math.round(t * 1000)} ms`;
  return `${t.toFixed(step % 1 ? 1 : 0)} s`;
}

/** Round axis ticks (seconds) for a span: 1, 2 or 5 × a power of ten, at most `count` + 1 of them. */
export function ticks(span: number, count = 4): number[] {
  if (!(span > 0)) return [0];
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let t = 0; t <= span + 1e-9; t += step) out.push(Number(t.toFixed(9)));
  return out;
}
