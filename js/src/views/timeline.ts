/** The turn's waterfall: a row per stage, bars positioned by event timestamps relative to turn_started. */
import { clear, el, fmtMs } from "../dom";
import { timeline, type TurnData } from "../state";

export class TimelineView {
  readonly el = el("div", { class: "cf-tl", "data-testid": "timeline" });

  show(turn: TurnData): void {
    const t = timeline(turn);
    clear(this.el);
    const stats = el(
      "div",
      { class: "cf-row cf-tl-stats" },
      stat("TTFT", t.ttftMs !== null ? fmtMs(t.ttftMs) : "–"),
      stat("tokens/s", t.tokensPerS !== null ? t.tokensPerS.toFixed(1) : t.live ? "…" : "–"),
      stat("total", fmtMs(t.total * 1000)),
      t.live ? el("span", { class: "cf-pill cf-pill-live", text: "live" }) : null,
    );
    this.el.appendChild(stats);
    if (!t.rows.length) {
      this.el.appendChild(el("div", { class: "cf-empty", text: "No stages yet." }));
      return;
    }
    const min = Math.min(0, ...t.rows.map((r) => r.start));
    const span = t.total - min || 1;
    const pct = (s: number) => `${(((s - min) / span) * 100).toFixed(3)}%`;
    const grid = el("div", { class: "cf-tl-grid" });
    const axis = el("div", { class: "cf-tl-axis" });
    for (let i = 0; i <= 4; i++) {
      const s = min + (span * i) / 4;
      const tick = el("span", { class: "cf-tl-tick", text: fmtMs(s * 1000) });
      tick.style.left = `${(i / 4) * 100}%`;
      axis.appendChild(tick);
    }
    grid.append(el("span", { class: "cf-tl-label cf-muted", text: "stage" }), axis, el("span", { class: "cf-tl-dur cf-muted", text: "time" }), el("span", { class: "cf-tl-detail cf-muted", text: "detail" }));
    for (const row of t.rows) {
      const track = el("div", { class: "cf-tl-track" });
      const b = el("span", { class: `cf-tl-bar cf-tl-${row.kind}`, title: `${row.label}: ${fmtMs((row.end - row.start) * 1000)} · ${row.detail}` });
      b.style.left = pct(row.start);
      b.style.width = `max(2px, ${(((row.end - row.start) / span) * 100).toFixed(3)}%)`;
      if (row.reusedFraction !== undefined && row.reusedFraction > 0) {
        const reused = el("span", { class: "cf-tl-reused", title: "reused from the prompt cache" });
        reused.style.width = `${(row.reusedFraction * 100).toFixed(1)}%`;
        b.appendChild(reused);
      }
      track.appendChild(b);
      if (t.ttftMs !== null) {
        const line = el("span", { class: "cf-tl-ttft" });
        line.style.left = pct(t.ttftMs / 1000);
        track.appendChild(line);
      }
      grid.append(
        el("span", { class: "cf-tl-label", title: row.detail, text: row.label }),
        track,
        el("span", { class: "cf-tl-dur", text: fmtMs((row.end - row.start) * 1000) }),
        el("span", { class: "cf-tl-detail cf-muted", text: row.detail }),
      );
    }
    this.el.appendChild(grid);
    this.el.appendChild(el("div", { class: "cf-legend" }, legend("cf-tl-prefill", "prefill computed"), legend("cf-tl-reused", "prefill reused (prompt cache)"), legend("cf-tl-decode", "decode"), legend("cf-tl-tool", "tool"), legend("cf-tl-ttft-key", "time to first token")));
  }
}

function stat(name: string, value: string): HTMLElement {
  return el("span", { class: "cf-stat" }, el("span", { class: "cf-stat-value", text: value }), el("span", { class: "cf-stat-name", text: name }));
}

function legend(cls: string, text: string): HTMLElement {
  return el("span", { class: "cf-legend-item" }, el("span", { class: `cf-swatch ${cls}` }), el("span", { text }));
}
