import { describe, expect, it } from "vitest";
import { answerText, Conversation, createTurn, mergeEvents, promptTokens, summarize, takeAccount } from "../src/state";
import { rowOf } from "./fake_model";
import { completedOf, FIX, tokensOf } from "./helpers";

describe("reducer on the real fixtures", () => {
  for (const [name, fx] of Object.entries(FIX)) {
    it(`${name}: token count and text equal completed`, () => {
      const turn = createTurn(fx);
      mergeEvents(turn, fx.events, fx.pieces);
      const s = summarize(turn.events);
      expect(s.tokens.length).toBe(tokensOf(fx).length);
      expect(answerText(s)).toBe(completedOf(fx).text);
      expect(turn.lastSeq).toBe(fx.events.length - 1);
    });
  }

  it("dedupes repeated and out-of-order batches", () => {
    const fx = FIX.tool;
    const turn = createTurn(fx);
    const a = fx.events.slice(0, 10);
    const b = fx.events.slice(10);
    expect(mergeEvents(turn, b, fx.pieces).appended).toBe(true);
    const m = mergeEvents(turn, [...a, ...a, b[0]], fx.pieces);
    expect(m.appended).toBe(false);
    expect(m.added.length).toBe(10);
    expect(turn.events.map((e) => e.sequence_number)).toEqual(fx.events.map((e) => e.sequence_number));
    expect(mergeEvents(turn, fx.events).added).toEqual([]);
    expect(answerText(summarize(turn.events))).toBe(completedOf(fx).text);
  });

  it("Conversation: rows list the finished turns, live messages and a fetch's replay merge without duplicates", () => {
    const fx = FIX.answer;
    const conv = new Conversation();
    conv.sync([rowOf(FIX.tool)], { turn_id: fx.turn_id, prewarm: null, fork_of: "" });
    expect(conv.order).toEqual([FIX.tool.turn_id, fx.turn_id]);
    expect(conv.lacking()).toEqual([FIX.tool.turn_id]); // a row brings no events: the view asks for them
    const c1 = conv.receive(fx.turn_id, fx.events.slice(0, 8), fx.pieces);
    expect(c1.appended.get(fx.turn_id)?.length).toBe(8);
    const c2 = conv.receive(fx.turn_id, fx.events.slice(4, 12), fx.pieces); // a resume re-sends 4..7
    expect(c2.appended.get(fx.turn_id)?.map((e) => e.sequence_number)).toEqual([8, 9, 10, 11]);
    expect(conv.lastSeq()).toBe(11);
    conv.receive(fx.turn_id, fx.events.slice(12), fx.pieces);
    const c3 = conv.sync([rowOf(FIX.tool), rowOf(fx)], null); // the turn ended: its row, not its events again
    expect(c3.appended.size).toBe(0);
    expect(c3.figures.has(fx.turn_id)).toBe(true);
    expect(conv.turns.get(fx.turn_id)!.events.length).toBe(fx.events.length);
    expect(conv.lacking()).toEqual([FIX.tool.turn_id]);
    conv.receive(FIX.tool.turn_id, FIX.tool.events, FIX.tool.pieces, FIX.tool.account);
    expect(conv.lacking()).toEqual([]);
    expect(conv.sync([rowOf(FIX.tool), rowOf(fx)], null).figures.size).toBe(0); // the same rows: nothing to redraw
    conv.sync([], null);
    expect(conv.list()).toEqual([]);
  });

  it("tool cards sit where the stream paused and match results by call_id", () => {
    const s = summarize(FIX.tool.events);
    expect(s.tools.length).toBe(1);
    expect(s.tools[0].call.name).toBe("calculator");
    expect(s.tools[0].result?.output).toBe("391");
    expect(s.tools[0].afterTokens).toBe(0);
    expect(s.rounds.length).toBe(2);
  });
});

describe("context", () => {
  it("the account from the most events is kept: a late message never rolls it back", () => {
    const fx = FIX.answer;
    const turn = createTurn(fx);
    const account = fx.account!;
    expect(takeAccount(turn, account)).toBe(true);
    expect(takeAccount(turn, { ...account, events: account.events - 5 })).toBe(false);
    expect(turn.account).toBe(account);
    const conv = new Conversation();
    conv.receive(fx.turn_id, fx.events, fx.pieces, account);
    conv.receive(fx.turn_id, fx.events.slice(0, 4), fx.pieces, { ...account, events: 4 }); // a resume's replay
    expect(conv.turns.get(fx.turn_id)!.account).toBe(account);
  });

  it("prompt tokens carry provenance kinds and special badges", () => {
    const s = summarize(FIX.answer.events);
    const toks = promptTokens(s.rounds[0].tokenized!, s.rounds[0].assembled, FIX.answer.pieces);
    expect(toks.length).toBe(38);
    expect(toks[0]).toMatchObject({ text: "<|im_start|>", special: true, kind: "template" });
    expect(toks[3].kind).toBe("system");
    expect(
      toks
        .slice(25, 32)
        .map((t) => t.text)
        .join(""),
    ).toBe("What is the capital of France?");
    expect(toks.slice(25, 32).every((t) => t.kind === "user")).toBe(true);
  });
});
