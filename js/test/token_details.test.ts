/** The token card says what the repetition penalty did, where the engine reported it, and nothing where it did not. */
import { describe, expect, it } from "vitest";
import type { Alternative, TokenDelta } from "../src/types";
import { cutReason, penaltyShown, tokenDetails } from "../src/views/token_details";
import penaltyTurn from "./fixtures/penalty.json";
import { FIX, REMOTE, rec, tokensOf } from "./helpers";

/** penalty.json: "And of Germany?" at repetition penalty 1.1, answered "Das Rheinlande: Bavaria, Germany (German)",
 * recorded when a chat's penalty counted the prompt too (as the engine's and the server's still do): the card shows
 * what the engine reported, whatever the penalty counted. */
const PENALTY = rec(penaltyTurn);
const PARAMS = { temperature: 0.2, top_k: 0, top_p: 0.9, min_p: 0, repetition_penalty: 1.1 };
const card = (token: TokenDelta, params: Record<string, unknown> = PARAMS) =>
  tokenDetails(token, PENALTY.pieces, { canFork: false, params, onFork: () => {} });
const fact = (el: HTMLElement, name: string) => {
  const names = [...el.querySelectorAll("dt")].map((d) => d.textContent);
  return names.includes(name) ? el.querySelectorAll("dd")[names.indexOf(name)].textContent : null;
};
const headers = (el: HTMLElement) => [...el.querySelectorAll("th")].map((t) => t.textContent);
const tokenAt = (index: number) => tokensOf(PENALTY).find((t) => t.index === index)!;

describe("the repetition penalty in the token card", () => {
  it("shows the chosen token under the model, after the penalty and after sampling, and who the penalty lowered", () => {
    // token 4: the model's favourite ":" (62.7 %) was in the prompt; the penalty lowered it and "land" won
    const el = card(tokenAt(4));
    expect(fact(el, "probability")).toMatch(/^29\.0 % under the model \(logprob -1\.23\d\)$/);
    expect(fact(el, "after penalty")).toBe("65.6 % (raised: the penalty lowered “:”, “,”)");
    expect(fact(el, "after sampling")).toBe("100.0 % with temperature 0.2, top-p 0.9");
    expect(headers(el)).toEqual(["alternative", "probability", "after penalty", "after sampling", ""]);
    const marked = [...el.querySelectorAll('[data-testid="penalized"]')].map((m) => m.closest("tr")!.textContent);
    expect(marked.length).toBe(2);
    expect(marked[0]).toBe(":↓62.7 %19.6 %cut by top-p 0.9");
    expect(el.querySelector(".cf-td-key")!.textContent).toContain("lowered by the repetition penalty");
  });

  it("says when the chosen token itself was lowered", () => {
    const token = tokenAt(6); // ":" again: the penalty counted it (the prompt's, then), lowered it, yet it won
    expect(token.alternatives[0].penalized).toBe(true);
    expect(fact(card(token), "after penalty")).toMatch(
      /^80\.\d % \(lowered: it is already in the text the penalty counts/,
    );
  });

  it("shows nothing of the penalty where it is off, or where the engine did not say (a remote or an older turn)", () => {
    expect(fact(card(tokenAt(4), { ...PARAMS, repetition_penalty: 1 }), "after penalty")).toBeNull();
    for (const token of [tokensOf(REMOTE)[1], tokensOf(FIX.answer)[1]]) {
      const el = card(token); // (both recorded at penalty 1.1: a server sends no such data; answer.json predates it)
      expect(penaltyShown(token, PARAMS)).toBeNull();
      expect(fact(el, "after penalty")).toBeNull();
      expect(headers(el)).not.toContain("after penalty");
      expect(el.querySelector('[data-testid="penalized"]')).toBeNull();
    }
  });
});

describe("why an alternative was cut", () => {
  const alt = (id: number, p: number, after: number | null, penalized = false): Alternative => ({
    token_id: id,
    text: String(id),
    logprob: Math.log(p),
    sampling_prob: id === 1 ? 1 : 0,
    penalized,
    penalized_logprob: after === null ? null : Math.log(after),
  });

  it("measures min-p after the penalty where the engine reported it (its ↓ names the penalty)", () => {
    // under the model 2 is half of 1 (kept at min-p 0.4); after the penalty a third (cut)
    const alts = [alt(1, 0.6, 0.6), alt(2, 0.3, 0.2, true)];
    expect(cutReason(alts[1], 1, alts, { temperature: 1, min_p: 0.4, repetition_penalty: 1.5 })).toBe(
      "below min-p 0.4",
    );
    const unknown = [alt(1, 0.6, null), alt(2, 0.3, null)];
    expect(cutReason(unknown[1], 1, unknown, { temperature: 1, min_p: 0.4 })).toBe(
      "not allowed here (tool-call schema)",
    );
  });
});
