/** Interventions as forks: the Attention tab's heads grid and steering form send `intervene`, only for the latest
 * ended turn while nothing generates; a turn answered again is drawn beside the answer it replaces, the parting
 * point marked in both, and the words of its `intervened` event as its header. */
import { describe, expect, it } from "vitest";
import { createTurn, mergeEvents, summarize } from "../src/state";
import type { ChatEvent, Intervened, ModelInfo, ViewMessage } from "../src/types";
import { describeIntervention, partingPoint, stageDifferences } from "../src/views/compare";
import { InterveneView } from "../src/views/intervene";
import { MODEL_INFO, type TurnRecord } from "./fake_model";
import { FIX, streamOf, tokensOf } from "./helpers";

const PART_AT = 2;
const HEADS = [
  { layer: 3, head: 1 },
  { layer: 3, head: 4 },
];

/** FIX.answer answered again with heads 3.1 and 3.4 knocked out: its tokens differ from PART_AT on. */
function againOf(original: TurnRecord): TurnRecord {
  const turn_id = "turn_again";
  const events: ChatEvent[] = [];
  for (const e of original.events) {
    if (e.type === "turn_started") {
      events.push({ ...e, turn_id, fork_of: original.turn_id, fork_index: -1 });
      const change: Intervened = { ...e, type: "intervened", turn_id, sequence_number: -1, heads: HEADS, steering: [] };
      events.push(change as ChatEvent);
    } else if (e.type === "token" && e.index >= PART_AT) {
      events.push({ ...e, turn_id, token_id: e.token_id + 1, text: `${e.text}!`, logprob: -2.5 });
    } else events.push({ ...e, turn_id } as ChatEvent);
  }
  return {
    ...original,
    turn_id,
    events: events.map((e, i) => ({ ...e, sequence_number: i })),
    fork_of: original.turn_id,
  };
}

describe("a turn answered again on a changed model", () => {
  it("is drawn beside the answer it replaces, the parting point marked in both and named in its header", () => {
    const again = againOf(FIX.answer);
    const stream = streamOf([FIX.answer, again]);
    const [original, changed] = [...stream.el.querySelectorAll<HTMLElement>(".cf-turn")];
    expect(original.classList.contains("cf-superseded")).toBe(false); // (not folded away, as a token fork's parent)
    expect(original.querySelector(".cf-fork-note")!.textContent).toContain(
      "✕ replaced by the next turn, answered again with heads 3.1 and 3.4 knocked out",
    );
    const compare = changed.querySelector<HTMLElement>("[data-testid=intervention-compare]")!;
    expect(compare.querySelector("[data-testid=intervention-header]")!.textContent).toContain(
      "answered again with heads 3.1 and 3.4 knocked out",
    );
    const columns = [...compare.querySelectorAll<HTMLElement>(".cf-compare-col")];
    expect(columns.map((c) => c.dataset.turn)).toEqual([FIX.answer.turn_id, "turn_again"]);
    for (const column of columns) {
      const mark = column.querySelector<HTMLElement>("[data-testid=parting]")!;
      expect(mark.dataset.index).toBe(String(PART_AT));
      const chips = [...column.querySelectorAll<HTMLElement>("[data-testid=compare-token]")];
      expect(chips.map((c) => c.classList.contains("cf-differs")).indexOf(true)).toBe(PART_AT);
      expect(mark.nextElementSibling).toBe(chips[PART_AT]);
    }
    const tokens = tokensOf(FIX.answer);
    const summary = compare.querySelector("[data-testid=parting-summary]")!.textContent!;
    expect(summary).toContain(`part at token ${PART_AT}`);
    expect(summary).toContain(`logprob ${tokens[PART_AT].logprob.toFixed(2)}`);
    expect(summary).toContain("logprob -2.50");
    const row = compare.querySelector<HTMLElement>(`[data-testid=divergence] tr[data-index="${PART_AT}"]`)!;
    expect(row.classList.contains("cf-differs")).toBe(true);
    expect(compare.querySelector("[data-testid=stage-differences]")!.textContent).toContain("did the same");
  });

  it("says the words of the kernel's Intervened.describe()", () => {
    const base = { ...tokensOf(FIX.answer)[0], type: "intervened" } as unknown as Intervened;
    const steered = { ...base, heads: [], steering: [{ layer: 10, label: '"love" − "hate"', strength: 4, norm: 3 }] };
    expect(describeIntervention(steered)).toBe('steered after layer 10 along "love" − "hate" (strength 4)');
    expect(describeIntervention({ ...base, heads: [HEADS[0]], steering: [] })).toBe("head 3.1 knocked out");
  });

  it("finds where two answers part and what the other stages did differently", () => {
    const tokens = tokensOf(FIX.answer);
    expect(partingPoint(tokens, tokens)).toBe(-1);
    expect(partingPoint(tokens, tokens.slice(0, 3))).toBe(3);
    const turn = createTurn({ turn_id: "a" });
    mergeEvents(turn, FIX.blocked.events);
    const plain = createTurn({ turn_id: "b" });
    mergeEvents(plain, FIX.answer.events);
    const lines = stageDifferences(summarize(plain.events), summarize(turn.events));
    expect(lines.some((l) => l.includes("safety"))).toBe(true);
  });
});

const INFO: ModelInfo = {
  ...(MODEL_INFO as unknown as ModelInfo),
  layers: 4,
  heads: 3,
  probe_layers: [1, 2],
  probe_categories: [
    ["S1", "Violent Crimes"],
    ["S9", "Indiscriminate Weapons"],
  ],
};

function ended(): ReturnType<typeof createTurn> {
  const turn = createTurn(FIX.answer);
  mergeEvents(turn, FIX.answer.events, FIX.answer.pieces);
  return turn;
}

describe("the Attention tab's answer again", () => {
  it("knocks out the heads picked in the grid, marked and counted", () => {
    const sent: ViewMessage[] = [];
    const view = new InterveneView((m) => sent.push(m));
    view.setModelInfo(INFO);
    view.setTurn(ended(), true, "idle");
    const cells = view.el.querySelectorAll<HTMLButtonElement>("[data-testid=head-cell]");
    expect(cells.length).toBe(12);
    const button = view.el.querySelector<HTMLButtonElement>("[data-testid=intervene-heads]")!;
    expect(button.disabled).toBe(true);
    const cell = (l: number, h: number) =>
      view.el.querySelector<HTMLButtonElement>(`[data-testid=head-cell][data-layer="${l}"][data-head="${h}"]`)!;
    cell(3, 1).click();
    cell(1, 2).click();
    expect(cell(3, 1).getAttribute("aria-pressed")).toBe("true");
    expect(view.el.querySelector("[data-testid=heads-count]")!.textContent).toBe("2 heads selected: 1.2, 3.1");
    button.click();
    expect(sent).toEqual([
      {
        type: "intervene",
        turn_id: FIX.answer.turn_id,
        heads: [
          [1, 2],
          [3, 1],
        ],
        steer: null,
      },
    ]);
  });

  it("waits while a turn generates, and changes only the latest turn", () => {
    const view = new InterveneView(() => {});
    view.setModelInfo(INFO);
    view.el.querySelector<HTMLButtonElement>("[data-testid=head-cell]")!.click();
    const button = view.el.querySelector<HTMLButtonElement>("[data-testid=intervene-heads]")!;
    const note = view.el.querySelector("[data-testid=intervene-note]")!;
    view.setTurn(ended(), true, "generating");
    expect(button.disabled).toBe(true);
    expect(note.textContent).toContain("A turn is generating");
    view.setTurn(ended(), false, "idle");
    expect(button.disabled).toBe(true);
    expect(note.textContent).toContain("Only the latest turn can be answered again");
    view.setTurn(ended(), true, "idle");
    expect(button.disabled).toBe(false);
  });

  it("steers along two texts, or along a probe category at the probe's layers", () => {
    const sent: ViewMessage[] = [];
    const view = new InterveneView((m) => sent.push(m));
    view.setModelInfo(INFO);
    view.setTurn(ended(), true, "idle");
    const form = view.el.querySelector<HTMLFormElement>("[data-testid=steer-form]")!;
    const input = (id: string) => form.querySelector<HTMLInputElement | HTMLSelectElement>(`[data-testid=${id}]`)!;
    input("steer-toward").value = "love";
    input("steer-away").value = "hate";
    input("steer-layer").value = "2";
    input("steer-strength").value = "3";
    form.querySelector<HTMLButtonElement>("[data-testid=intervene-steer]")!.click();
    input("steer-source").value = "probe";
    input("steer-source").dispatchEvent(new Event("change"));
    const layers = [...(input("steer-layer") as HTMLSelectElement).options].map((o) => o.value);
    expect(layers).toEqual(["1", "2"]);
    input("steer-category").value = "S9";
    form.querySelector<HTMLButtonElement>("[data-testid=intervene-steer]")!.click();
    expect(sent.map((m) => (m.type === "intervene" ? m.steer : null))).toEqual([
      { layer: 2, strength: 3, toward: "love", away: "hate" },
      { layer: 2, strength: 3, category: "S9" },
    ]);
  });

  it("offers no probe category where the model has no probe", () => {
    const view = new InterveneView(() => {});
    view.setModelInfo({ ...INFO, probe_layers: [], probe_categories: [] });
    const options = [...view.el.querySelectorAll<HTMLOptionElement>("[data-testid=steer-source] option")];
    expect(options.map((o) => o.value)).toEqual(["texts"]);
  });
});
