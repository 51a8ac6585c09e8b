/** A fork from the panel: the replaced turn folded to a line that names the fork's token, the fork's prompt drawn
 * with its pieces though they came after it was first drawn. */
import { describe, expect, it } from "vitest";
import { createTurn, mergeEvents } from "../src/state";
import type { ChatEvent } from "../src/types";
import { ContextView } from "../src/views/context";
import type { TurnRecord } from "./fake_model";
import { FIX, streamOf } from "./helpers";

const FORK_AT = 2;

/** FIX.answer forked at token FORK_AT: its events under another turn id, turn_started saying so. */
function forkOf(original: TurnRecord): TurnRecord {
  const turn_id = "turn_fork";
  const events = original.events.map((e) =>
    e.type === "turn_started"
      ? { ...e, turn_id, fork_of: original.turn_id, fork_index: FORK_AT }
      : ({ ...e, turn_id } as ChatEvent),
  );
  return { ...original, turn_id, events, fork_of: original.turn_id };
}

describe("a turn a fork replaced", () => {
  it("is folded to one line naming the fork's token, and unfolds with the replaced tokens struck through", () => {
    const stream = streamOf([FIX.answer, forkOf(FIX.answer)]);
    const [original, fork] = [...stream.el.querySelectorAll<HTMLElement>(".cf-turn")];
    expect(original.classList.contains("cf-superseded")).toBe(true);
    const note = original.querySelector(".cf-fork-note")!;
    expect(note.textContent).toContain(`replaced by the fork from token ${FORK_AT} (below)`);
    expect(fork.querySelector(".cf-fork-note")!.textContent).toContain(`forked from token ${FORK_AT}`);
    expect(fork.classList.contains("cf-superseded")).toBe(false);
    const struck = [...original.querySelectorAll<HTMLElement>(".cf-tok")].map((c) =>
      c.classList.contains("cf-tok-replaced"),
    );
    expect(struck.indexOf(true)).toBe(FORK_AT);
    expect(struck.slice(FORK_AT).every(Boolean)).toBe(true);
    const toggle = note.querySelector<HTMLButtonElement>("[data-testid=superseded-toggle]")!;
    expect(toggle.getAttribute("aria-expanded")).toBe("false");
    toggle.click();
    expect(original.classList.contains("cf-unfolded")).toBe(true);
    expect(toggle.textContent).toBe("hide it");
  });
});

describe("the context tab of a fork", () => {
  it("draws its prompt again with the pieces that came after it was drawn (not raw ids)", () => {
    const fx = forkOf(FIX.answer);
    const turn = createTurn(fx);
    mergeEvents(turn, fx.events, {}); // the events first, no pieces yet
    const view = new ContextView();
    view.show(turn);
    const prompt = () => view.el.querySelector("[data-testid=prompt-tokens]")!.textContent ?? "";
    expect(prompt()).toMatch(/^#\d+#\d+/);
    mergeEvents(turn, [], fx.pieces); // the pieces come (with a later batch)
    view.show(turn);
    expect(prompt()).toContain("<|im_start|>");
    expect(prompt()).not.toMatch(/#\d+#\d+/);
  });
});
