import { describe, expect, it } from "vitest";
import { fmtMs } from "../src/dom";
import { createTurn, mergeEvents } from "../src/state";
import { ContextView } from "../src/views/context";
import { TimelineView, ticks } from "../src/views/timeline";
import type { TurnRecord } from "./fake_model";
import { FIX, REMOTE } from "./helpers";

const turnOf = (fx: TurnRecord) => {
  const turn = createTurn(fx);
  mergeEvents(turn, fx.events, fx.pieces);
  turn.account = fx.account ?? null;
  return turn;
};
const stat = (view: TimelineView, id: string) =>
  view.el.querySelector(`[data-testid=stat-${id}] .cf-stat-value`)?.textContent;

describe("the timeline draws the account, and computes nothing", () => {
  for (const [name, fx] of Object.entries({ ...FIX, remote: REMOTE })) {
    it(`${name}: every figure on screen is the account's`, () => {
      const a = fx.account!;
      const view = new TimelineView();
      view.show(turnOf(fx));
      if (!a.stages.length) return expect(view.el.textContent).toContain("No stages yet.");
      expect(stat(view, "ttft")).toBe(a.ttft_ms === null ? "–" : fmtMs(a.ttft_ms));
      expect(stat(view, "tps")).toBe(a.tokens_per_s === null ? "–" : a.tokens_per_s.toFixed(1));
      expect(stat(view, "queued")).toBe(fmtMs(a.queued_ms));
      expect(stat(view, "answer")).toBe(fmtMs(a.answer_ms!));
      const bars = [...view.el.querySelectorAll<HTMLElement>(".cf-tl-bar:not(.cf-tl-compile)")];
      expect(bars.map((b) => b.dataset.kind)).toEqual(a.stages.map((s) => s.kind));
      const compiles = a.stages.flatMap((s) => s.compiles);
      expect(view.el.querySelectorAll(".cf-tl-compile[data-kind=compile]").length).toBe(compiles.length);
      const drawnTicks = view.el.querySelectorAll(".cf-tl-tok").length;
      expect(drawnTicks).toBe(a.stages.reduce((n, s) => n + s.ticks_ms.length, 0));
      const took = [...view.el.querySelectorAll(".cf-tl-grid > .cf-tl-dur")].slice(1).map((d) => d.textContent);
      expect(took).toEqual(a.stages.map((s) => fmtMs(s.end_ms - s.start_ms)));
    });
  }

  it("a compile is drawn inside the bar of the stage it delayed", () => {
    const view = new TimelineView();
    view.show(turnOf(FIX.answer));
    for (const track of view.el.querySelectorAll(".cf-tl-track")) {
      const bar = track.querySelector<HTMLElement>(".cf-tl-bar:not(.cf-tl-compile)")!;
      for (const c of track.querySelectorAll<HTMLElement>(".cf-tl-compile")) {
        expect(Number(c.dataset.start)).toBeGreaterThanOrEqual(Number(bar.dataset.start) - 1e-3);
        expect(Number(c.dataset.end)).toBeLessThanOrEqual(Number(bar.dataset.end) + 1e-3);
      }
    }
  });

  it("the title after the answer is a figure of its own, and the first token's note says what it was made of", () => {
    const a = FIX.answer.account!;
    const view = new TimelineView();
    view.show(turnOf(FIX.answer));
    expect(stat(view, "title")).toBe(`+${fmtMs(a.title_after_ms)}`);
    expect(view.el.querySelector("[data-testid=ttft-note]")!.textContent).toBe(a.ttft_note);
  });

  it("axis ticks are round", () => {
    expect(ticks(9.85)).toEqual([0, 5]);
    expect(ticks(0.35)).toEqual([0, 0.1, 0.2, 0.3]);
  });
});

describe("the context tab draws the account's gauge", () => {
  it("its head, its bar and its legend are the round's figures; the parts add up to the window", () => {
    const a = FIX.tool.account!;
    const view = new ContextView();
    view.show(turnOf(FIX.tool));
    const last = a.rounds[a.rounds.length - 1];
    expect(view.el.querySelector("[data-testid=context-used]")!.textContent).toBe(
      `${last.used_tokens.toLocaleString()} / ${last.window.toLocaleString()} tokens`,
    );
    expect(view.el.querySelector("[data-testid=prefill-note]")!.textContent).toBe(last.prefill_note);
    const parts = [...view.el.querySelectorAll<HTMLElement>("[data-testid=context-bar] > span")];
    expect(parts.map((p) => Number(p.dataset.tokens))).toEqual(last.gauge.map((g) => g.tokens));
    expect(parts.reduce((n, p) => n + parseFloat(p.style.width), 0)).toBeCloseTo(100, 1);
  });
});
