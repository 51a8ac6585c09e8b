import { describe, expect, it } from "vitest";
import { createTurn, mergeEvents, type TurnData } from "../src/state";
import type { ChatEvent, TurnRecord } from "../src/types";
import { ticks, waterfall } from "../src/waterfall";
import { completedOf, FIX, rec, tokensOf } from "./helpers";

const turnOf = (fx: TurnRecord): TurnData => {
  const turn = createTurn(fx);
  mergeEvents(turn, fx.events, fx.pieces);
  return turn;
};
const startedOf = (fx: TurnRecord) =>
  fx.events.find((e): e is Extract<ChatEvent, { type: "turn_started" }> => e.type === "turn_started")!;
const originOf = (fx: TurnRecord) => startedOf(fx).timestamp - (startedOf(fx).queued_ms ?? 0) / 1000;
const LATENCY_KINDS = new Set([
  "safety_decision",
  "memory_recalled",
  "context_assembled",
  "tokenized",
  "tool_result",
  "title_generated",
]);

describe("the timeline's waterfall, against the events of real turns", () => {
  for (const [name, fx] of Object.entries(FIX)) {
    it(`${name}: every stage's start and end come from an event's timestamp and latency`, () => {
      const w = waterfall(turnOf(fx));
      const origin = originOf(fx);
      const spans = w.stages.map((s) => [s.start, s.end]);
      for (const e of fx.events) {
        if (!LATENCY_KINDS.has(e.type)) continue;
        const end = e.timestamp - origin;
        const start = end - (e as { latency_ms: number }).latency_ms / 1000;
        expect(
          spans.some(([a, b]) => Math.abs(a - start) < 1e-9 && Math.abs(b - end) < 1e-9),
          `${e.type} #${e.sequence_number}`,
        ).toBe(true);
      }
      for (const p of fx.events.filter((e) => e.type === "prefill")) {
        const end = p.timestamp - origin;
        const rows = w.stages.filter(
          (s) =>
            Math.abs(s.end - end) < 1e-9 ||
            (s.kind === "compile" && Math.abs(s.start - (end - p.latency_ms / 1000)) < 1e-9),
        );
        const took = rows
          .filter((s) => s.kind === "prefill" || s.kind === "compile")
          .reduce((n, s) => n + (s.end - s.start), 0);
        expect(took * 1000).toBeCloseTo(p.latency_ms, 6); // compile + prefill rows = the prefill's latency
      }
      // in order of start, nothing before the request was submitted, nothing after the last event
      expect(w.stages.map((s) => s.start)).toEqual([...w.stages.map((s) => s.start)].sort((a, b) => a - b));
      expect(Math.min(...w.stages.map((s) => s.start))).toBeGreaterThanOrEqual(-1e-3);
      expect(w.total).toBeCloseTo(fx.events[fx.events.length - 1].timestamp - origin, 9);
      expect(Math.max(...w.stages.map((s) => s.end))).toBeLessThanOrEqual(w.total + 1e-9);
    });
  }

  it("decode runs from the prefill to the last token shown, a tick per token; tok/s and TTFT are the magic's", () => {
    const fx = FIX.tool;
    const w = waterfall(turnOf(fx));
    const origin = originOf(fx);
    const decode = w.stages.filter((s) => s.kind === "decode");
    const prefills = fx.events.filter((e) => e.type === "prefill");
    const call = fx.events.find((e) => e.type === "tool_call")!;
    const toks = tokensOf(fx);
    expect(decode.map((s) => [s.start, s.end])).toEqual([
      [prefills[0].timestamp - origin, call.timestamp - origin], // the call, decoded under the schema mask
      [prefills[1].timestamp - origin, toks[toks.length - 1].timestamp - origin],
    ]);
    expect(decode[1].ticks).toEqual(toks.map((t) => t.timestamp - origin));
    expect(w.tokensPerS).toBe(completedOf(fx).tokens_per_s);
    expect(w.ttftMs).toBe(completedOf(fx).timings.ttft_ms);
    expect((w.ttftAt! - (toks[0].timestamp - origin)) * 1000).toBeLessThan(2); // the line sits at the first token
    expect(w.stages.find((s) => s.kind === "tool")).toMatchObject({ label: "tool calculator" });
  });

  it("queue wait and XLA compile are rows of their own, not prefill; a prewarm is a note, not a negative time", () => {
    const events = FIX.answer.events.map((e): ChatEvent => {
      if (e.type === "turn_started") return { ...e, queued_ms: 250 };
      if (e.type === "prefill") return { ...e, compile_ms: e.latency_ms * 0.75 };
      if (e.type === "token" && e.index === 1) return { ...e, compile_ms: 5 };
      return e;
    });
    const fx = rec({ ...FIX.answer, events });
    const turn = turnOf(fx);
    turn.prewarm = { chars: 30, prompt_tokens: 38, computed_tokens: 18, cached_before: 20, latency_ms: 80 };
    const w = waterfall(turn);
    const prefill = events.find((e) => e.type === "prefill")!;
    const started = startedOf(fx);
    expect(w.stages[0]).toMatchObject({ kind: "queue", start: 0, end: 0.25 });
    const compile = w.stages.filter((s) => s.kind === "compile");
    expect(compile.length).toBe(2);
    const origin = started.timestamp - 0.25;
    const end = prefill.timestamp - origin;
    expect(compile[0].start).toBeCloseTo(end - prefill.latency_ms / 1000, 9);
    expect(compile[0].end - compile[0].start).toBeCloseTo((prefill.latency_ms * 0.75) / 1000, 9);
    const row = w.stages.find((s) => s.kind === "prefill")!;
    expect(row.start).toBeCloseTo(compile[0].end, 9);
    expect(w.compileMs).toBeCloseTo(prefill.latency_ms * 0.75 + 5, 6);
    expect(w.queuedMs).toBe(250);
    expect(w.ttftAt).toBeCloseTo(0.25 + completedOf(fx).timings.ttft_ms! / 1000, 9);
    expect(w.stages.every((s) => s.start >= 0)).toBe(true);
    expect(w.prewarm).toContain("Prewarmed while typing, before this request: 38 tokens (18 computed) in 80 ms");
  });

  it("a wait for a row of the engine's batch is a queue row that ends where the prefill began", () => {
    const events = FIX.answer.events.map((e): ChatEvent => (e.type === "prefill" ? { ...e, queued_ms: 400 } : e));
    const w = waterfall(turnOf(rec({ ...FIX.answer, events })));
    const compile = w.stages.find((s) => s.kind === "compile")!; // (the fixture's prefill began by compiling)
    const wait = w.stages.find((s) => s.label === "wait for a row")!;
    expect(wait.kind).toBe("queue");
    expect(wait.end - wait.start).toBeCloseTo(0.4, 9);
    expect(wait.end).toBeCloseTo(compile.start, 9);
    const started = events.find((e) => e.type === "turn_started")!;
    expect(w.queuedMs).toBeCloseTo((started.queued_ms ?? 0) + 400, 9); // the "queued" figure counts both waits
    expect(waterfall(turnOf(FIX.answer)).stages.some((s) => s.label === "wait for a row")).toBe(false);
  });

  it("the title, written after the answer (its event follows the terminal one), is the last row", () => {
    for (const fx of [FIX.answer, FIX.tool, FIX.redacted]) {
      const done = completedOf(fx);
      const title = fx.events[fx.events.length - 1] as Extract<ChatEvent, { type: "title_generated" }>;
      expect(title.type).toBe("title_generated");
      expect(title.sequence_number).toBe(done.sequence_number + 1);
      const w = waterfall(turnOf(fx));
      const last = w.stages[w.stages.length - 1];
      expect(last).toMatchObject({ kind: "title", label: "title" });
      expect(last.end).toBeCloseTo(title.timestamp - originOf(fx), 9);
      expect(last.start).toBeGreaterThanOrEqual(done.timestamp - originOf(fx) - 1e-3); // it began when the answer ended
      expect(last.detail).toContain(title.title);
      expect(last.detail).toContain("after the answer");
      expect(w.total).toBeCloseTo(last.end, 9);
    }
  });

  it("a title that came before the terminal event is drawn as written beside the answer, mid-stream", () => {
    const fx = FIX.answer;
    const title = fx.events[fx.events.length - 1];
    const done = completedOf(fx);
    const moved = { ...title, sequence_number: done.sequence_number, timestamp: done.timestamp - 0.001 };
    const events = [...fx.events.slice(0, -2), moved, { ...done, sequence_number: done.sequence_number + 1 }];
    const w = waterfall(turnOf({ ...fx, events } as TurnRecord));
    const row = w.stages.find((s) => s.kind === "title")!;
    expect(row.detail).toContain("beside the answer, mid-stream");
    expect(row.detail).not.toContain("after the answer");
  });

  it("a new process's XLA compile is a row of its own, out of the prefill and decode it happened in", () => {
    const fx = FIX.answer; // the first turn of a fresh process
    const w = waterfall(turnOf(fx));
    const prefill = fx.events.find((e) => e.type === "prefill")!;
    const toks = tokensOf(fx);
    const compile = w.stages.filter((s) => s.kind === "compile");
    // the prefill's compile, then the decode step's (the first token's compile_ms repeats the prefill's)
    expect(compile.map((s) => (s.end - s.start) * 1000)).toEqual(
      [prefill.compile_ms, toks[1].compile_ms].map((v) => expect.closeTo(v!, 6)),
    );
    expect(w.compileMs).toBeCloseTo(
      prefill.compile_ms! + toks.slice(1).reduce((n, t) => n + (t.compile_ms ?? 0), 0),
      6,
    );
    expect(prefill.compile_ms).toBeGreaterThan(0);
  });

  it("axis ticks are round numbers", () => {
    expect(ticks(7.85)).toEqual([0, 2, 4, 6]);
    expect(ticks(0.37)).toEqual([0, 0.1, 0.2, 0.3]);
    expect(ticks(1)).toEqual([0, 0.5, 1]);
  });
});
