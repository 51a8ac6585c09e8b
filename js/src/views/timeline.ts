/** The turn's waterfall (see waterfall.ts): a row per stage on one time axis from the request's submission. */
import { clear, el, fmtMs } from "../dom";
import type { TurnData } from "../state";
import { type Stage, ticks, type Waterfall, waterfall } from "../waterfall";

const LEGEND: [string, string][] = [
  ["queue", "queue"],
  ["safety", "safety"],
  ["context", "context"],
  ["compile", "XLA compile"],
  ["prefill", "prefill"],
  ["decode", "decode (ticks: tokens shown)"],
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

  /** Draws `turn`'s waterfall (a no-op when none of its events changed). */
  show(turn: TurnData): void {
    const key = `${turn.turn_id}|${turn.lastSeq}|${turn.events.length}|${turn.prewarm?.latency_ms ?? ""}`;
    if (key === this.drawn) return;
    this.drawn = key;
    const w = waterfall(turn);
    clear(this.el);
    this.el.appendChild(stats(w));
    if (w.prewarm)
      this.el.appendChild(el("div", { class: "cf-muted cf-tl-note", "data-testid": "prewarm-note", text: w.prewarm }));
    if (!w.stages.length) {
      this.el.appendChild(el("div", { class: "cf-empty", text: "No stages yet." }));
      return;
    }
    this.el.append(
      grid(w),
      el(
        "div",
        { class: "cf-legend" },
        ...LEGEND.filter(([kind]) => w.stages.some((s) => s.kind === kind)).map(([kind, text]) =>
          legend(`cf-tl-${kind}`, text),
        ),
        legend("cf-tl-ttft-key", "first token"),
      ),
    );
  }
}

function stats(w: Waterfall): HTMLElement {
  return el(
    "div",
    { class: "cf-row cf-tl-stats" },
    stat("time to first token", w.ttftMs !== null ? fmtMs(w.ttftMs) : "–", "ttft"),
    stat("tokens/s", w.tokensPerS !== null ? w.tokensPerS.toFixed(1) : w.live ? "…" : "–", "tps"),
    stat("queued", fmtMs(w.queuedMs), "queued"),
    stat("XLA compile", remote(w) ? "on the server" : fmtMs(w.compileMs), "compile"),
    stat("total", fmtMs(w.total * 1000), "total"),
    w.live ? el("span", { class: "cf-pill cf-pill-live", text: "live" }) : null,
  );
}

/** A remote turn's waterfall (it has HTTP rows): what the server compiled is not known here. */
function remote(w: Waterfall): boolean {
  return w.stages.some((s) => s.kind === "http");
}

function grid(w: Waterfall): HTMLElement {
  const marks = ticks(w.total);
  const span = Math.max(w.total, marks[marks.length - 1], 1e-3);
  const pct = (s: number) => `${((s / span) * 100).toFixed(3)}%`;
  const axis = el("div", { class: "cf-tl-axis" });
  for (const t of marks) {
    const tick = el("span", { class: "cf-tl-tick", text: tickText(t, marks[1] ?? 1) });
    tick.style.left = pct(t);
    axis.appendChild(tick);
  }
  const box = el("div", { class: "cf-tl-grid", "data-testid": "waterfall" });
  box.append(
    el("span", { class: "cf-tl-label cf-muted", text: "stage" }),
    axis,
    el("span", { class: "cf-tl-dur cf-muted", text: "took" }),
  );
  for (const s of w.stages) box.append(...row(s, pct, w.ttftAt));
  return box;
}

function row(s: Stage, pct: (s: number) => string, ttftAt: number | null): HTMLElement[] {
  const took = fmtMs((s.end - s.start) * 1000);
  const tip = `${s.label}: ${fmtMs(s.start * 1000)} → ${fmtMs(s.end * 1000)} (${took})\n${s.detail}`;
  const label = el(
    "span",
    { class: "cf-tl-label", title: tip },
    el("span", { class: "cf-tl-name", text: s.label }),
    el("span", { class: "cf-tl-detail cf-muted", text: s.detail }),
  );
  return [label, track(s, pct, ttftAt, tip), el("span", { class: "cf-tl-dur", text: took })];
}

/** The stage's bar (at least 2 px wide), a tick per token shown, and the time-to-first-token line. */
function track(s: Stage, pct: (s: number) => string, ttftAt: number | null, tip: string): HTMLElement {
  const bar = el("span", {
    class: `cf-tl-bar cf-tl-${s.kind}`,
    "data-kind": s.kind,
    "data-start": s.start.toFixed(6),
    "data-end": s.end.toFixed(6),
  });
  bar.style.left = pct(s.start);
  bar.style.width = `max(2px, calc(${pct(s.end)} - ${pct(s.start)}))`;
  const tokenTicks = (s.ticks ?? []).map((t) => mark("cf-tl-tok", pct(t)));
  const ttft = ttftAt === null ? null : mark("cf-tl-ttft", pct(ttftAt));
  return el("div", { class: "cf-tl-track", title: tip }, bar, ...tokenTicks, ttft);
}

/** A mark on a track, `left` from its start. */
function mark(cls: string, left: string): HTMLElement {
  const node = el("span", { class: cls });
  node.style.left = left;
  return node;
}

/** An axis label: "0", "250 ms", "2 s", "1.5 s" (as many decimals as the step needs). */
function tickText(t: number, step: number): string {
  if (t === 0) return "0";
  if (step < 1) return `${Math.round(t * 1000)} ms`;
  return `${t.toFixed(step % 1 ? 1 : 0)} s`;
}

function stat(name: string, value: string, id: string): HTMLElement {
  return el(
    "span",
    { class: "cf-stat", "data-testid": `stat-${id}` },
    el("span", { class: "cf-stat-value", text: value }),
    el("span", { class: "cf-stat-name", text: name }),
  );
}

function legend(cls: string, text: string): HTMLElement {
  return el("span", { class: "cf-legend-item" }, el("span", { class: `cf-swatch ${cls}` }), el("span", { text }));
}
