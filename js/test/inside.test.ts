/** The looks inside a turn (issue 36): the lens reply decoded and drawn (the chips' shading, a token's lens in its
 * popover), "why this token?" from the popover to the Why tab (progress, the heat map, the segment bars, "rather
 * than", integrated gradients on request, errors), and a remote turn that cannot be looked into. */
import { describe, expect, it } from "vitest";
import type { InsideProgressMessage, LensMessage, TokenDelta, ViewMessage, WhyMessage } from "../src/types";
import { decodeLens, lensShade, messageEndNote, namedArrays, settledText, tokenLens } from "../src/views/lens";
import { heat, shares, signed } from "../src/views/why";
import type { FakeModel, TurnRecord } from "./fake_model";
import { FIX, REMOTE, tokensOf } from "./helpers";
import { usePanelPage } from "./mount";

const page = usePanelPage();
const { mount, q } = page;
const chip = (turnId: string, index: number) =>
  page.host.querySelector(`[data-testid="token"][data-turn="${turnId}"][data-index="${index}"]`) as HTMLElement;
const click = (node: Element) => node.dispatchEvent(new MouseEvent("click", { bubbles: true }));
const LAYERS = 4;
const ROWS = LAYERS + 1;

/** A lens reply for a record's answer: at token i, row r's top list is the chosen token from row `settle(i)` on
 * (else token 7, 8, …), the chosen token's rank 1 there and 3 before, below the top depth in row 0 of odd tokens. */
function lensReply(record: TurnRecord, request_id: string): { msg: LensMessage; buffers: ArrayBuffer[] } {
  const tokens = tokensOf(record);
  const n = tokens.length;
  const settle = (i: number) => (i === 1 ? -1 : i % ROWS);
  const width = Math.max(...tokens.map((t) => 1 + t.alternatives.filter((a) => a.token_id !== t.token_id).length));
  const topIds = new Int32Array(n * ROWS * 5);
  const topLps = new Float32Array(n * ROWS * 5);
  const ranks = new Int32Array(n * width * ROWS);
  const lps = new Float32Array(n * width * ROWS).fill(Number.NaN);
  const series: number[][] = [];
  tokens.forEach((t, i) => {
    const ids = [t.token_id, ...t.alternatives.filter((a) => a.token_id !== t.token_id).map((a) => a.token_id)];
    series.push([...ids, ...Array(width - ids.length).fill(-1)]);
    for (let r = 0; r < ROWS; r++) {
      const top = settle(i) >= 0 && r >= settle(i);
      for (let j = 0; j < 5; j++) {
        topIds[(i * ROWS + r) * 5 + j] = top && j === 0 ? t.token_id : 7 + j;
        topLps[(i * ROWS + r) * 5 + j] = -0.5 - j;
      }
      const known = !(r === 0 && i % 2 === 1);
      ranks[i * width * ROWS + r] = known ? (top ? 1 : 3) : 0;
      lps[i * width * ROWS + r] = known ? (top ? -0.5 : -2.5) : Number.NaN;
    }
  });
  const prompt = 38;
  const msg: LensMessage = {
    type: "lens",
    request_id,
    turn_id: record.turn_id,
    layers: LAYERS,
    k: 5,
    depth: 64,
    indices: tokens.map((t) => t.index),
    positions: tokens.map((_, i) => prompt - 1 + i),
    series,
    settled: tokens.map((_, i) => settle(i)),
    prompt_tokens: prompt,
    prompt_top: Array.from({ length: prompt }, (_, p) => (p === 31 ? tokens[2].token_id : 9)),
    prompt_settled: Array.from({ length: prompt }, (_, p) => (p === 31 ? 3 : LAYERS)),
    message_end: 31,
    arrays: [
      { name: "top_ids", dtype: "int32", shape: [n, ROWS, 5] },
      { name: "top_logprobs", dtype: "float32", shape: [n, ROWS, 5] },
      { name: "series_ranks", dtype: "int32", shape: [n, width, ROWS] },
      { name: "series_logprobs", dtype: "float32", shape: [n, width, ROWS] },
      { name: "prompt_logprobs", dtype: "float32", shape: [prompt] },
    ],
    pieces: { "7": ["seven", "37"], "8": ["eight", "38"], "9": ["nine", "39"] },
    compile_ms: 1200,
    compute_ms: 3100,
  };
  const promptLps = new Float32Array(prompt).fill(-0.25);
  return { msg, buffers: [topIds.buffer, topLps.buffer, ranks.buffer, lps.buffer, promptLps.buffer] };
}

/** A why reply for answer token `index` of the fixture (38 prompt tokens, then the answer before the token). */
function whyReply(request_id: string, index: number, contrast: number | null = null): WhyMessage {
  const tokens = tokensOf(FIX.answer);
  const tokenized = FIX.answer.events.find((e) => e.type === "tokenized");
  const prompt = tokenized?.type === "tokenized" ? [...tokenized.ids] : [];
  const ids = [...prompt, ...tokens.slice(0, index).map((t) => t.token_id)];
  const values = ids.map((_, p) => ((p % 5) - 2) / 100);
  const column = ids.map((_, p) => (p >= 38 ? 3 : p >= 25 && p < 32 ? 1 : p >= 3 && p < 20 ? 0 : 2));
  const sum = (k: number) => values.reduce((s, v, p) => s + (column[p] === k ? v : 0), 0);
  const count = (k: number) => column.filter((c) => c === k).length;
  const labels: [string, WhyMessage["segments"][number]["kind"]][] = [
    ["system", "system"],
    ["user", "user"],
    ["chat template", "template"],
    ["answer so far", "generated"],
  ];
  return {
    type: "why",
    request_id,
    turn_id: FIX.answer.turn_id,
    index,
    method: "grad_x_input",
    steps: 0,
    target_id: tokens[index].token_id,
    contrast_id: contrast,
    target_logprob: tokens[index].logprob,
    contrast_logprob: null,
    ids,
    prompt_tokens: 38,
    values,
    column,
    segments: labels.map(([label, kind], k) => ({ label, kind, tokens: count(k), value: sum(k) })),
    total: values.reduce((a, b) => a + b, 0),
    note: "",
    compile_ms: 900,
    compute_ms: 1500,
  };
}

/** An `inside_progress` message. */
function progress(
  request_id: string,
  request: "lens" | "why",
  text: string,
  elapsed_ms: number,
  [done, total] = [0, 0],
): InsideProgressMessage {
  const stage = text.startsWith("XLA") ? "compiling" : "computing";
  return { type: "inside_progress", request_id, request, stage, done, total, text, elapsed_ms };
}

function sent(model: FakeModel, type: string): ViewMessage[] {
  return model.sent.map((s) => s.content).filter((c) => c.type === type);
}

function lastOf<T extends ViewMessage["type"]>(model: FakeModel, type: T): Extract<ViewMessage, { type: T }> {
  const all = sent(model, type);
  if (!all.length) throw new Error(`the view sent no ${type}`);
  return all[all.length - 1] as Extract<ViewMessage, { type: T }>;
}

describe("the lens reply", () => {
  it("decodes its named buffers (an unaligned DataView too) and gives each token's rows", () => {
    const { msg, buffers } = lensReply(FIX.answer, "l");
    const copy = new Uint8Array(buffers[2].byteLength + 1);
    copy.set(new Uint8Array(buffers[2]), 1);
    const unaligned = [...buffers];
    unaligned[2] = new DataView(copy.buffer, 1, buffers[2].byteLength) as unknown as ArrayBuffer;
    const lens = decodeLens(msg, unaligned);
    const t = tokenLens(lens, 3);
    expect(t?.settled).toBe(3);
    expect(t?.top[3][0]).toEqual([tokensOf(FIX.answer)[3].token_id, -0.5]);
    expect(t?.top[2].map(([id]) => id)).toEqual([7, 8, 9, 10, 11]);
    expect(t?.series[0].ranks).toEqual([0, 3, 3, 1, 1]);
    expect(t?.series[0].logprobs).toEqual([null, -2.5, -2.5, -0.5, -0.5]);
    expect(tokenLens(lens, 999)).toBeNull();
    expect(() => namedArrays(msg.arrays, buffers.slice(1))).toThrow("names 5 arrays but carries 4");
  });

  it("names the settled layer and shades earlier darker", () => {
    expect(settledText(0, 30)).toBe("the top choice from the embeddings on, at every layer");
    expect(settledText(21, 30)).toBe("the top choice from layer 21 on, through the last (30)");
    expect(settledText(30, 30)).toBe("the top choice only at the last layer (30)");
    expect(settledText(-1, 30)).toContain("not the model's top choice even at the last layer");
    expect(lensShade(0, 30)).toBe(1);
    expect(lensShade(30, 30)).toBeCloseTo(0.15);
    expect(lensShade(10, 30)).toBeGreaterThan(lensShade(20, 30));
    expect(lensShade(-1, 30)).toBe(-1);
  });

  it("says what the model predicted at the end of the user's message", () => {
    const { msg, buffers } = lensReply(FIX.answer, "l");
    const lens = decodeLens(msg, buffers);
    const tokens = tokensOf(FIX.answer);
    const pieces = { ...FIX.answer.pieces, ...msg.pieces };
    const said = messageEndNote(lens, 2, tokens[2].token_id, pieces);
    expect(said).toMatch(
      /^At the end of your message, the model already predicted “.+” \(its top choice from layer 3 on, 78 %\)\.$/,
    );
    expect(messageEndNote(lens, 0, tokens[0].token_id, pieces)).toContain(
      "the model's top choice for the next token was",
    );
    expect(messageEndNote(lens, 4, tokens[4].token_id, pieces)).toBe("");
  });
});

describe("the lens in the panel", () => {
  function lensed(): FakeModel {
    const model = mount({ turns: [FIX.answer] });
    q("lens-toggle").click();
    return model;
  }

  it("the toggle shows the tokens, names the definition, asks for the latest turn's lens once", () => {
    const model = lensed();
    expect(q("view-tokens").getAttribute("aria-pressed")).toBe("true");
    expect(q("lens-legend-bar").hidden).toBe(false);
    expect(q("lens-definition").textContent).toContain("shaded by the layer from which it was the model's top choice");
    const request = lastOf(model, "lens");
    expect(request).toEqual({ type: "lens", request_id: request.request_id, turn_id: FIX.answer.turn_id });
    q("lens-toggle").click();
    q("lens-toggle").click();
    expect(sent(model, "lens")).toHaveLength(1); // (asked once: it is on its way)
    expect(q("conversation").getAttribute("data-lens")).toBe("on");
  });

  it("shades each chip by its settled layer once the reply came, and says how far it is meanwhile", () => {
    const model = lensed();
    const { request_id } = lastOf(model, "lens");
    model.message(
      progress(request_id, "lens", "XLA compiles this look's programs (new for each look), 1.2 s so far", 1500),
    );
    expect(q("lens-bar-status").textContent).toBe(
      "Lens: XLA compiles this look's programs (new for each look), 1.2 s so far · 1.5 s",
    );
    const { msg, buffers } = lensReply(FIX.answer, request_id);
    model.message(msg, buffers);
    const turn = FIX.answer.turn_id;
    expect(chip(turn, 3).getAttribute("data-lens")).toBe("3");
    expect(Number(chip(turn, 0).style.getPropertyValue("--cf-lens"))).toBe(1);
    expect(Number(chip(turn, 4).style.getPropertyValue("--cf-lens"))).toBeCloseTo(0.15);
    expect(chip(turn, 1).classList.contains("cf-lens-never")).toBe(true);
    expect(chip(turn, 3).title).toBe("lens: the top choice from layer 3 on, through the last (4)");
    expect(q("lens-bar-status").textContent).toContain("The latest answer's lens: 3.1 s, of which XLA compiling 1.2 s");
    // the prompt in the Context tab is lensed too: what the model predicted after each of its tokens
    const prompt = [...q("prompt-tokens").querySelectorAll<HTMLElement>(".cf-ptok")];
    expect(q("prompt-lens-note").hidden).toBe(false);
    expect(prompt[31].getAttribute("data-lens")).toBe("3");
    expect(prompt[31].title).toContain(
      `next: “${tokensOf(FIX.answer)[2].text}” 77.9 %, the top choice from layer 3 on`,
    );
    expect(prompt[0].title).toContain("next: “nine” 77.9 %, the top choice only at the last layer (4)");
    q("lens-toggle").click(); // off: the shading goes, the titles are as they were
    expect(prompt[31].hasAttribute("data-lens") || q("prompt-lens-note").hidden === false).toBe(false);
    expect(prompt[31].title).not.toContain("next:");
    q("lens-toggle").click();
    // another view's reply is not this one's
    model.message({ ...msg, request_id: "someone-else", settled: msg.settled.map(() => 0) }, buffers);
    expect(chip(turn, 3).getAttribute("data-lens")).toBe("3");
  });

  it("a token's popover shows its layers' top five, its rank and probability, the alternatives' lines", () => {
    const model = lensed();
    const { request_id } = lastOf(model, "lens");
    const { msg, buffers } = lensReply(FIX.answer, request_id);
    model.message(msg, buffers);
    click(chip(FIX.answer.turn_id, 3));
    const panel = q("lens-panel");
    expect(panel.getAttribute("data-settled")).toBe("3");
    expect(q("lens-summary").textContent).toBe(
      `“${tokensOf(FIX.answer)[3].text}” was the top choice from layer 3 on, through the last (4)`,
    );
    const rows = [...q("lens-table").querySelectorAll("tbody tr")];
    expect(rows.map((r) => r.getAttribute("data-row"))).toEqual(["4", "3", "2", "1", "0"]);
    expect(rows.map((r) => r.getAttribute("data-rank"))).toEqual(["1", "1", "3", "3", "0"]);
    expect(rows[2].textContent).toContain("seven");
    expect(rows[2].lastElementChild?.textContent).toBe("#3 · 8.2 %");
    expect(rows[4].lastElementChild?.textContent).toBe("> 64");
    expect(
      rows[0].classList.contains("cf-lens-row-settled") && !rows[2].classList.contains("cf-lens-row-settled"),
    ).toBe(true);
    const alternatives = tokensOf(FIX.answer)[3].alternatives.filter(
      (a) => a.token_id !== tokensOf(FIX.answer)[3].token_id,
    );
    expect(q("lens-legend").querySelectorAll(".cf-legend-item")).toHaveLength(1 + alternatives.length);
    expect(panel.querySelectorAll("polyline.cf-lens-chosen").length).toBe(1);
  });

  it("a token of a turn without a lens offers it; clicked with the shading on, its turn is asked for", () => {
    const model = mount({ turns: [FIX.answer, FIX.tool] });
    q("view-tokens").click();
    click(chip(FIX.answer.turn_id, 2));
    expect(q("lens-ask").textContent).toBe("Lens: what each layer predicted");
    q("lens-ask").click();
    expect(lastOf(model, "lens").turn_id).toBe(FIX.answer.turn_id);
    expect(q("lens-status").textContent).toBe("Lens: asking the kernel…");
    const { request_id } = lastOf(model, "lens");
    model.message({ type: "inside_error", request_id, request: "lens", message: "This turn has no prompt." });
    expect(q("lens-status").textContent).toBe("The lens failed: This turn has no prompt.");
    expect(q("lens-ask").textContent).toBe("Lens: try again");
  });
});

describe("why this token?", () => {
  function asked(index = 3): FakeModel {
    const model = mount({ turns: [FIX.answer] });
    q("view-tokens").click();
    click(chip(FIX.answer.turn_id, index));
    q("why-this").click();
    return model;
  }

  it("sends a why for the token and opens the Why tab, which shows the progress", () => {
    const model = asked();
    const request = lastOf(model, "why");
    expect(request).toEqual({
      type: "why",
      request_id: request.request_id,
      turn_id: FIX.answer.turn_id,
      index: 3,
      method: "grad_x_input",
    });
    expect(q("tab-why").getAttribute("aria-selected")).toBe("true");
    expect(q("why").closest("[hidden]")).toBeNull();
    expect(q("why-progress-text").textContent).toBe("asking the kernel");
    model.message(progress(request.request_id, "why", "computing", 400));
    expect(q("why-progress-text").textContent).toBe("computing · 0.4 s");
  });

  it("draws the input as a heat map with the kernel's values and a bar per segment", () => {
    const model = asked();
    const reply = whyReply(lastOf(model, "why").request_id, 3);
    model.message(reply);
    expect(q("why-progress").hidden).toBe(true);
    const chips = [...q("why-prompt").querySelectorAll<HTMLElement>("[data-testid=why-token]")];
    expect(chips.map((c) => Number(c.dataset.value))).toEqual(reply.values);
    expect(chips[25].classList.contains("cf-kind-user") && chips[40].classList.contains("cf-kind-generated")).toBe(
      true,
    );
    expect(chips[0].classList.contains("cf-why-neg")).toBe(true); // (−0.02)
    expect(Number(chips[4].style.getPropertyValue("--cf-heat"))).toBe(1); // (the largest, +0.02)
    const bars = [...q("why-segments").querySelectorAll<HTMLElement>("[data-testid=why-segment]")];
    expect(bars.map((b) => b.dataset.kind)).toEqual(["system", "user", "template", "generated"]);
    expect(bars.map((b) => Number(b.dataset.value))).toEqual(reply.segments.map((s) => s.value));
    expect(bars.map((b) => b.querySelector("[data-testid=why-segment-value]")?.textContent)).toEqual(
      reply.segments.map((s) => signed(s.value)),
    );
    expect(Number(q("why-total").dataset.value)).toBe(reply.total);
  });

  it("rather than an alternative, and integrated gradients, are asked for from the tab and the popover", () => {
    const model = asked();
    const token = tokensOf(FIX.answer)[3] as TokenDelta;
    const other = token.alternatives.find((a) => a.token_id !== token.token_id)!;
    model.message(whyReply(lastOf(model, "why").request_id, 3));
    const rather = q<HTMLSelectElement>("why-rather");
    rather.value = String(other.token_id);
    rather.dispatchEvent(new Event("change"));
    expect(lastOf(model, "why")).toMatchObject({ index: 3, method: "grad_x_input", contrast_token_id: other.token_id });
    model.message(whyReply(lastOf(model, "why").request_id, 3, other.token_id));
    q("why-integrated").click();
    expect(lastOf(model, "why")).toMatchObject({
      method: "integrated_gradients",
      steps: 32,
      contrast_token_id: other.token_id,
    });
    const { request_id } = lastOf(model, "why");
    model.message(progress(request_id, "why", "integrated gradients, step 8 of 32", 5200, [8, 32]));
    expect(q("why-progress").getAttribute("data-done")).toBe("8");
    expect((q("why-progress").querySelector(".cf-why-bar-fill") as HTMLElement).style.width).toBe("25%");
    model.message({ type: "inside_error", request_id, request: "why", message: "The kernel stopped." });
    expect(q("why-error").textContent).toBe("The kernel stopped.");
    // "why not this?" in the popover's alternatives
    click(chip(FIX.answer.turn_id, 3));
    const link = q("popover").querySelector("[data-testid=why-rather-this]") as HTMLButtonElement;
    link.click();
    expect(lastOf(model, "why")).toMatchObject({ index: 3, method: "grad_x_input" });
    expect(lastOf(model, "why").contrast_token_id).toBeGreaterThanOrEqual(0);
  });

  it("shares are signed and their magnitudes add up to 100 %; heat is √ of the share of the largest", () => {
    const s = shares([
      { label: "a", kind: "user", tokens: 1, value: 0.3 },
      { label: "b", kind: "system", tokens: 1, value: -0.1 },
    ]);
    expect(s[0]).toBeCloseTo(0.75);
    expect(s[1]).toBeCloseTo(-0.25);
    const h = heat([0.04, -0.01, 0]);
    expect(h.strength).toEqual([1, 0.5, 0]);
    expect(h.sign).toEqual([1, -1, 0]);
    expect(signed(-0.00456)).toBe("−0.0046");
    expect(signed(0.5)).toBe("+0.500");
  });
});

describe("a remote turn", () => {
  it("is not looked into: its popover says why and the lens is not asked for", () => {
    const model = mount({ turns: [REMOTE] });
    q("lens-toggle").click();
    click(chip(REMOTE.turn_id, 1));
    expect(q("look-note").textContent).toContain("A remote server's turn");
    expect(q("popover").querySelector("[data-testid=why-this]")).toBeNull();
    expect(q("popover").querySelector("[data-testid=why-rather-this]")).toBeNull();
    expect(sent(model, "lens")).toHaveLength(0);
  });
});
