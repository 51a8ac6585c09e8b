import { Conversation } from "../src/state";
import type { ChatEvent } from "../src/types";
import { StreamView } from "../src/views/stream";
import { rowOf, type TurnRecord } from "./fake_model";
import answer from "./fixtures/answer.json";
import blocked from "./fixtures/blocked.json";
import redacted from "./fixtures/redacted.json";
import remote from "./fixtures/remote.json";
import tool from "./fixtures/tool.json";

export const rec = (f: unknown): TurnRecord => ({
  prewarm: null,
  fork_of: "",
  ...(f as Omit<TurnRecord, "prewarm" | "fork_of">),
});
export const FIX = { answer: rec(answer), tool: rec(tool), redacted: rec(redacted), blocked: rec(blocked) };
/** A remote chat's turn (`Chat(base_url=…)` against `chatflow serve`): wire events, tokens without ids. */
export const REMOTE = rec(remote);
export const tokensOf = (r: TurnRecord) =>
  r.events.filter((e): e is Extract<ChatEvent, { type: "token" }> => e.type === "token");
export const completedOf = (r: TurnRecord) =>
  r.events.find((e): e is Extract<ChatEvent, { type: "completed" }> => e.type === "completed")!;

/** The stream over finished turns whose events came (the kernel's replies to the view's fetches). */
export function streamOf(records: TurnRecord[]): StreamView {
  const view = new StreamView({ hoverToken: () => {}, clickToken: () => {}, selectTurn: () => {} });
  const conv = new Conversation();
  view.update(conv, conv.sync(records.map(rowOf), null));
  for (const r of records) view.update(conv, conv.receive(r.turn_id, r.events, r.pieces, r.account));
  return view;
}
