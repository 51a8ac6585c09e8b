/** The panel's wiring (src/panel/): settings toggle, popover closing, turn picker, the lazy redraw, cleanup. */
import { describe, expect, it, vi } from "vitest";
import { FETCH_WAIT_MS } from "../src/panel/panel";
import { baseTraits, FakeModel, MODEL_INFO } from "./fake_model";
import { FIX, tokensOf } from "./helpers";
import { usePanelPage } from "./mount";

const page = usePanelPage();
const { mount, q } = page;
const chip = (turnId: string, index: number) =>
  page.host.querySelector(`[data-testid="token"][data-turn="${turnId}"][data-index="${index}"]`) as HTMLElement;
const click = (node: Element) => node.dispatchEvent(new MouseEvent("click", { bubbles: true }));
const turnSelect = () => page.host.querySelector(".cf-tabs select") as HTMLSelectElement;

describe("header", () => {
  it("the settings button shows and hides the settings form", () => {
    mount({});
    const form = page.host.querySelector(".cf-settings") as HTMLFormElement;
    expect(form.hidden).toBe(true);
    q("settings-toggle").click();
    expect(form.hidden).toBe(false);
    expect(q("settings-toggle").getAttribute("aria-expanded")).toBe("true");
    q("settings-toggle").click();
    expect(form.hidden).toBe(true);
    expect(q("settings-toggle").getAttribute("aria-expanded")).toBe("false");
  });
});

describe("a pinned token popover", () => {
  function pinFirstToken(): HTMLElement {
    mount({ turns: [FIX.answer, FIX.tool] });
    q("view-tokens").click();
    const first = chip(FIX.answer.turn_id, 0);
    click(first);
    expect(q("popover").hidden).toBe(false);
    expect(first.classList.contains("cf-tok-selected")).toBe(true);
    return first;
  }

  it("stays while other chips are hovered", () => {
    pinFirstToken();
    const text = q("popover").textContent;
    chip(FIX.tool.turn_id, 1).dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    expect(q("popover").textContent).toBe(text);
  });

  it("closes on Escape, and its chip is no longer marked", () => {
    const first = pinFirstToken();
    q("conversation").dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(q("popover").hidden).toBe(true);
    expect(first.classList.contains("cf-tok-selected")).toBe(false);
  });

  it("closes on a click outside it, not on a click inside it", () => {
    pinFirstToken();
    click(q("popover"));
    expect(q("popover").hidden).toBe(false);
    click(document.body);
    expect(q("popover").hidden).toBe(true);
  });

  it("closes when the answers go back to text", () => {
    pinFirstToken();
    q("view-text").click();
    expect(q("popover").hidden).toBe(true);
    expect(q("view-text").getAttribute("aria-pressed")).toBe("true");
    expect(q("view-tokens").getAttribute("aria-pressed")).toBe("false");
  });

  it("shows the hovered chip once closed", () => {
    pinFirstToken();
    click(document.body);
    const hovered = tokensOf(FIX.tool)[1];
    chip(FIX.tool.turn_id, 1).dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    expect(q("popover").hidden).toBe(false);
    expect(q("popover").textContent).toContain(FIX.tool.pieces[String(hovered.token_id)][0]);
    expect(page.host.querySelector(".cf-tok-selected")).toBeNull(); // hovering marks nothing
  });
});

describe("the inspector's turn", () => {
  it("the picker lists the turns by their user message, latest first", () => {
    mount({ turns: [FIX.answer, FIX.tool] });
    const options = [...turnSelect().options].map((o) => [o.value, o.textContent?.slice(0, 3)]);
    expect(options).toEqual([
      ["", "lat"],
      [FIX.answer.turn_id, "#1 "],
      [FIX.tool.turn_id, "#2 "],
    ]);
  });

  it("follows the latest turn; picking one shows it at once", () => {
    mount({ turns: [FIX.answer, FIX.tool] });
    expect(q("prompt-tokens").querySelectorAll(".cf-ptok").length).toBe(379); // tool.json's prompt
    turnSelect().value = FIX.answer.turn_id;
    turnSelect().dispatchEvent(new Event("change"));
    expect(q("prompt-tokens").querySelectorAll(".cf-ptok").length).toBe(38); // answer.json's prompt
  });

  it("a click on an earlier turn in the conversation picks it, redrawn on a later frame", () => {
    vi.useFakeTimers();
    mount({ turns: [FIX.answer, FIX.tool] });
    click(page.host.querySelector(`.cf-turn[data-turn="${FIX.tool.turn_id}"]`) as HTMLElement);
    expect(turnSelect().value).toBe(""); // the latest: nothing to pick
    click(page.host.querySelector(`.cf-turn[data-turn="${FIX.answer.turn_id}"]`) as HTMLElement);
    expect(turnSelect().value).toBe(FIX.answer.turn_id);
    expect(q("prompt-tokens").querySelectorAll(".cf-ptok").length).toBe(379); // not yet
    vi.advanceTimersByTime(250);
    expect(q("prompt-tokens").querySelectorAll(".cf-ptok").length).toBe(38);
  });
});

describe("the conversation's scroll", () => {
  /** jsdom lays nothing out: the conversation's heights are set by hand. */
  function geometry(node: HTMLElement, size: { height: number; client: number }): void {
    Object.defineProperty(node, "scrollHeight", { get: () => size.height });
    Object.defineProperty(node, "clientHeight", { get: () => size.client });
  }
  const scrollTo = (node: HTMLElement, top: number) => {
    node.scrollTop = top;
    node.dispatchEvent(new Event("scroll"));
  };

  it("stays where the user scrolled when the layout grows around it, and follows again at the bottom", () => {
    const model = mount({ turns: [FIX.answer] });
    const conversation = q("conversation");
    const size = { height: 500, client: 300 };
    geometry(conversation, size);
    scrollTo(conversation, 40); // 160 px above the bottom: the user is reading
    size.client = 430; // a taller timeline beside it stretches the conversation: now 30 px from the bottom
    model.set("turns", [FIX.answer, FIX.tool]);
    expect(conversation.scrollTop).toBe(40);
    scrollTo(conversation, 70); // back at the bottom (500 - 430)
    size.height = 900;
    model.set("turns", [FIX.answer, FIX.tool, FIX.redacted]);
    expect(conversation.scrollTop).toBe(900); // follows the new text
  });
});

describe("settings: the model file", () => {
  const LOADED = {
    ...MODEL_INFO,
    file: "/models/SmolLM2-360M-Instruct.Q8_0.gguf",
    dtype: "float32",
    summary: "SmolLM2-360M-Instruct: llama, 362 M parameters, Q8_0 (Q8_0, F32), context 8,192 tokens; …",
  };
  const path = () => q<HTMLInputElement>("model-path");
  const loads = (model: FakeModel) => model.sent.filter((m) => m.content.type === "load_model").map((m) => m.content);

  it("shows the model in use, and Load sends the path typed (and the dtype chosen)", () => {
    const model = mount({ model_info: LOADED });
    expect(path().value).toBe("/models/SmolLM2-360M-Instruct.Q8_0.gguf");
    expect(q("model-about").textContent).toBe(LOADED.summary);
    path().value = "  /models/gemma-3-270m-it-Q4_K_M.gguf ";
    q("load-model").click();
    q<HTMLSelectElement>("model-dtype").value = "bfloat16";
    path().dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    path().value = "";
    q("load-model").click(); // (nothing typed: nothing sent)
    expect(loads(model)).toEqual([
      { type: "load_model", path: "/models/gemma-3-270m-it-Q4_K_M.gguf" },
      { type: "load_model", path: "/models/gemma-3-270m-it-Q4_K_M.gguf", dtype: "bfloat16" },
    ]);
  });

  it("while a model loads: its progress under the field, Load and Send off, the header says loading", () => {
    const model = mount({ model_info: LOADED });
    const progress = "Gemma-3-270M: gemma3, 268 M parameters, …\nloading x.gguf ▕████░░▏  40 % · dequantizing";
    model.set("status", "loading");
    model.set("loading", progress);
    expect(q("model-about").textContent).toBe(progress);
    expect([q<HTMLButtonElement>("load-model").disabled, q<HTMLButtonElement>("send").disabled]).toEqual([true, true]);
    expect(q("status").textContent).toBe("loading");
    q<HTMLTextAreaElement>("chat-input").value = "Hi";
    q("send").click();
    expect(model.sent.filter((m) => m.content.type === "send")).toEqual([]);
  });

  it("once loaded, the header and the field show the new model; a failed load keeps the path typed", () => {
    const model = mount({ model_info: LOADED });
    path().value = "/models/missing.gguf";
    model.set("error", "No model file at /models/missing.gguf. … The model in use is still SmolLM2-360M-Instruct.");
    expect(path().value).toBe("/models/missing.gguf"); // (to correct it)
    model.set("model_info", { ...LOADED, name: "gemma-3-270m-it", file: "/models/gemma-3-270m-it-Q4_K_M.gguf" });
    expect(path().value).toBe("/models/gemma-3-270m-it-Q4_K_M.gguf");
    expect(page.host.querySelector(".cf-header-meta")!.textContent).toContain("gemma-3-270m-it");
  });

  it("a remote chat's model is the server's: nothing to load", () => {
    mount({ model_info: { ...MODEL_INFO, remote: "http://127.0.0.1:8000/v1" } });
    expect([path().disabled, q<HTMLButtonElement>("load-model").disabled]).toEqual([true, true]);
    expect(q("model-about").textContent).toContain("the model is the server's");
  });
});

describe("cleanup", () => {
  it("unsubscribes from every trait and message and removes the panel", () => {
    const model = mount({ turns: [FIX.answer] });
    const names = [
      "turns",
      "live",
      "title",
      "session",
      "status",
      "model_info",
      "prewarm",
      "error",
      "settings",
      "loading",
    ];
    expect(names.map((n) => model.listeners(`change:${n}`))).toEqual(names.map(() => 1));
    page.unmount();
    expect(names.map((n) => model.listeners(`change:${n}`))).toEqual(names.map(() => 0));
    expect(model.listeners("msg:custom")).toBe(0);
    expect(page.host.childElementCount).toBe(0);
  });
});

describe("a turn's events cross once: a view asks for those it lacks", () => {
  /** The kernel's `turns` trait (rows) over these records, its replies to `fetch` held back until `answer()`. */
  function rowsOnly(records = [FIX.answer, FIX.tool]): FakeModel {
    const model = new FakeModel(baseTraits({ turns: records }));
    model.answersFetch = false;
    return page.render(model);
  }
  const answerAll = (model: FakeModel) => {
    for (const request of model.fetches()) model.answer(request);
  };

  it("a view opened after the turns (a reload, a second view) asks for each turn's events once, by id", () => {
    const model = rowsOnly();
    expect(model.fetches()).toEqual([
      { type: "fetch", turn_id: FIX.answer.turn_id, after: -1 },
      { type: "fetch", turn_id: FIX.tool.turn_id, after: -1 },
    ]);
    model.set("title", "Capitals"); // other traits change: nothing is asked again
    model.set("turns", [FIX.answer, FIX.tool]);
    expect(model.fetches().length).toBe(2);
  });

  it("before the events come, a turn shows its row: the user's message, the footer's figures, a note", () => {
    vi.useFakeTimers();
    const model = rowsOnly();
    const turn = page.host.querySelector(`.cf-turn[data-turn="${FIX.answer.turn_id}"]`) as HTMLElement;
    const user = (FIX.answer.events[0] as { user: string }).user;
    expect(turn.querySelector(".cf-msg-user")!.textContent).toContain(user);
    const a = FIX.answer.account!;
    expect(turn.querySelector(".cf-turn-foot")!.textContent).toBe(
      `${a.answer_tokens} answer tokens · ${a.tokens_per_s!.toFixed(1)} tok/s · first token ${(a.ttft_ms! / 1000).toFixed(2)} s · finish: stop`,
    );
    expect(turn.classList.contains("cf-live")).toBe(false);
    expect(turn.querySelector("[data-testid=fetching]")).not.toBeNull();
    expect(turnSelect().options[1].textContent).toContain(user.slice(0, 20)); // the picker's label, from the row
    answerAll(model);
    expect(turn.querySelector("[data-testid=fetching]")).toBeNull();
    expect(turn.querySelectorAll("[data-testid=token]").length).toBe(tokensOf(FIX.answer).length);
    vi.advanceTimersByTime(250); // (the inspector redraws on a later frame)
    expect(q("prompt-tokens").querySelectorAll(".cf-ptok").length).toBe(379); // the latest turn's (tool.json's) prompt
  });

  it("a turn picked before its events came is asked for again", () => {
    vi.useFakeTimers();
    const model = rowsOnly();
    click(page.host.querySelector(`.cf-turn[data-turn="${FIX.answer.turn_id}"]`) as HTMLElement);
    expect(model.fetches().filter((f) => f.turn_id === FIX.answer.turn_id).length).toBe(2);
    answerAll(model);
    vi.advanceTimersByTime(250);
    expect(q("prompt-tokens").querySelectorAll(".cf-ptok").length).toBe(38); // answer.json's prompt
    click(page.host.querySelector(`.cf-turn[data-turn="${FIX.answer.turn_id}"]`) as HTMLElement);
    expect(model.fetches().length).toBe(3); // it has the events now: nothing more
  });

  it("a live turn's end brings its row, not its events again: nothing is asked for", () => {
    const fx = FIX.answer;
    const model = mount({ live: { turn_id: fx.turn_id, prewarm: null, fork_of: "" }, status: "generating" });
    model.message({ type: "events", turn_id: fx.turn_id, events: fx.events, pieces: fx.pieces, account: fx.account });
    model.traits.live = null;
    model.set("turns", [fx]);
    expect(model.fetches()).toEqual([{ type: "fetch", turn_id: fx.turn_id, after: -1 }]); // (the start's resume)
    expect(page.host.querySelectorAll("[data-testid=token]").length).toBe(tokensOf(fx).length);
  });

  it("when no kernel answers (a saved notebook, not running), the turns say so after a while", () => {
    vi.useFakeTimers();
    rowsOnly();
    const note = () => page.host.querySelector(`.cf-turn[data-turn="${FIX.tool.turn_id}"] [data-testid=fetching]`);
    expect(note()!.textContent).toBe("fetching its events…");
    vi.advanceTimersByTime(FETCH_WAIT_MS);
    expect(note()!.textContent).toContain("did not answer (is it running?)");
  });

  it("a request the kernel refused shows in the notice and the console", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const model = mount({});
    model.message({ type: "request_error", request: "frobnicate", message: "The panel sent an unknown request." });
    expect(page.host.querySelector(".cf-notice-text")!.textContent).toBe("The panel sent an unknown request.");
    expect((page.host.querySelector(".cf-notice") as HTMLElement).hidden).toBe(false);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining("frobnicate"));
    model.set("error", "A turn is still generating."); // the kernel's own error trait comes first
    expect(page.host.querySelector(".cf-notice-text")!.textContent).toBe("A turn is still generating.");
  });
});
