import { describe, expect, it } from "vitest";
import { createTurn, mergeEvents } from "../src/state";
import type { ChatEvent } from "../src/types";
import { ContextView, remotePromptSize } from "../src/views/context";
import { tokenDetails } from "../src/views/token_details";
import { emptyWire, exchanges, isRemote, WireView } from "../src/views/wire";
import { FIX, REMOTE, tokensOf } from "./helpers";

const turn = () => {
  const t = createTurn(REMOTE);
  mergeEvents(t, REMOTE.events, REMOTE.pieces);
  return t;
};
const frames = REMOTE.events.filter((e): e is Extract<ChatEvent, { type: "sse_frame" }> => e.type === "sse_frame");

describe("a remote turn's wire (a real turn against chatflow serve)", () => {
  it("pairs each request with its response and frames; the key is masked", () => {
    expect(isRemote(REMOTE.events)).toBe(true);
    expect(isRemote(FIX.answer.events)).toBe(false);
    const [models, chat] = exchanges(REMOTE.events);
    expect([models.request.method, chat.request.method]).toEqual(["GET", "POST"]);
    expect(models.frames).toEqual([]);
    expect(chat.response?.status).toBe(200);
    expect(chat.frames.length).toBe(frames.length);
    expect(chat.request.headers.Authorization).toBe("Bearer sk-…abcd");
    expect(JSON.stringify(REMOTE)).not.toContain("sk-fixture-key");
  });

  it("draws the request, the status and every frame with its bytes", () => {
    const view = new WireView();
    view.show(turn());
    const text = view.el.textContent ?? "";
    expect(text).toContain("POST http://127.0.0.1:");
    expect(text).toContain("200 OK");
    expect(view.el.querySelectorAll("[data-testid=sse-frame]").length).toBe(frames.length);
    const bytes = frames.reduce((sum, f) => sum + f.bytes, 0);
    expect(view.el.querySelector("[data-testid=sse-summary]")!.textContent).toContain(
      `${bytes.toLocaleString()} bytes`,
    );
  });

  it("the timeline gets an HTTP row and an SSE row ticked at each frame's arrival", () => {
    const http = REMOTE.account!.stages.filter((s) => s.kind === "http");
    expect(http.map((s) => s.label)).toEqual(["HTTP GET /v1/models", "HTTP POST /v1/chat/completions", "SSE stream"]);
    const sse = http[2];
    expect(sse.ticks_ms.length).toBe(frames.length);
    for (const t of sse.ticks_ms) expect(t >= sse.start_ms - 1e-6 && t <= sse.end_ms + 1e-6).toBe(true);
  });

  it("a remote token's card says what the server does not send, and offers no fork", () => {
    const token = tokensOf(REMOTE)[1];
    const card = tokenDetails(token, {}, { canFork: true, params: {}, onFork: () => {} });
    const facts = Object.fromEntries(
      [...card.querySelectorAll("dt")].map((dt) => [dt.textContent, dt.nextElementSibling!.textContent]),
    );
    expect(facts.id).toBe("— (not sent)");
    expect(facts.entropy).toBe("— (not sent)");
    expect(card.querySelector("[data-testid=remote-token]")!.textContent).toContain("remote server");
    expect(card.querySelectorAll(".cf-alt-chosen").length).toBe(1); // (ids are -1: chosen by its logprob)
    expect(card.querySelectorAll("[data-testid=cut-reason]").length).toBe(0);
    expect(card.querySelectorAll("[data-testid=fork]").length).toBe(0); // (no ids to fork with)
  });

  it("the context tab says what the server reported of the prompt's size, or that it reported none", () => {
    const end = REMOTE.events.find((e) => e.type === "completed") as Extract<ChatEvent, { type: "completed" }>;
    expect(end.usage.prompt_tokens).toBeGreaterThan(0);
    const view = new ContextView();
    view.show(turn());
    const text = view.el.textContent ?? "";
    expect(text).toContain("The messages sent are in the Wire tab.");
    expect(text).toContain(`The server counted ${end.usage.prompt_tokens} prompt tokens (its usage).`);
    const unreported = { ...end, usage: { ...end.usage, prompt_tokens: null, total_tokens: null } };
    expect(remotePromptSize(unreported)).toBe(
      "The server did not report the prompt's size (its stream carried no usage).",
    );
    expect(remotePromptSize(null)).toContain("when the answer ends");
  });
});

describe("the Wire tab of a turn that sent no HTTP request", () => {
  const shown = (record: typeof FIX.answer) => {
    const t = createTurn(record);
    mergeEvents(t, record.events, record.pieces);
    const view = new WireView();
    view.show(t);
    return view.el;
  };

  it("a local turn: says nothing crossed a wire and names the options that send a turn to a server", () => {
    const tab = shown(FIX.answer);
    const text = tab.textContent ?? "";
    expect(text).toContain("This turn ran in this kernel, so nothing crossed a wire.");
    expect(text).toContain("chatflow serve");
    const names = [...tab.querySelectorAll("code")].map((c) => c.textContent);
    expect(names).toContain('cf.ChatWidget(cf.Chat(base_url="http://localhost:8000/v1", api_key=…))');
    expect(names).toContain("%%chat --inspect --server http://localhost:8000/v1 --api-key KEY");
    expect(text).toContain("Tour chapter 13");
    expect(tab.querySelectorAll("[data-testid=wire-exchange]").length).toBe(0);
  });

  it("a message the input layer blocked was never sent; a turn with no stage yet waits for its request", () => {
    expect(shown(FIX.blocked).textContent).toContain("blocked this message before it was sent");
    const started = FIX.answer.events.filter((e) => e.type === "turn_started");
    expect(emptyWire(started).textContent).toContain("No HTTP request yet");
  });

  it("a remote turn fills the tab instead", () => {
    const t = createTurn(REMOTE);
    mergeEvents(t, REMOTE.events, REMOTE.pieces);
    const view = new WireView();
    view.show(t);
    expect(view.el.querySelector("[data-testid=wire-empty]")).toBeNull();
  });
});
