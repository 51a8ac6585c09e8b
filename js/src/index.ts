/**
 * The anywidget entry point: wires the synced traits and custom messages (see js/README.md) to the views.
 *
 *   export default { render({ model, el }) { …; return cleanup } }
 */
import { parseColor, type RGB } from "./colormap";
import { el } from "./dom";
import { type Change, Conversation, summarize, type TurnData } from "./state";
import type { KernelMessage, MessageHandler, PanelTraits, Settings, TokenDelta, ViewMessage } from "./types";
import { AttentionView } from "./views/attention";
import { ContextView } from "./views/context";
import { ChatBox, Header, Notice, SettingsForm } from "./views/controls";
import { SafetyTab } from "./views/safety_tab";
import { type AnswerView, StreamView } from "./views/stream";
import { TimelineView } from "./views/timeline";
import { tokenDetails } from "./views/token_details";

/** The part of the anywidget model the panel uses (a fake in tests implements just this). */
export interface PanelModel {
  get<K extends keyof PanelTraits>(name: K): PanelTraits[K] | undefined;
  set<K extends keyof PanelTraits>(name: K, value: PanelTraits[K]): void;
  save_changes(): void;
  on(name: "msg:custom", callback: MessageHandler): void;
  on(name: `change:${keyof PanelTraits}`, callback: () => void): void;
  off(name: "msg:custom", callback: MessageHandler): void;
  off(name: `change:${keyof PanelTraits}`, callback: () => void): void;
  send(content: ViewMessage, callbacks?: unknown, buffers?: ArrayBuffer[] | ArrayBufferView[]): void;
}

const TABS = [
  ["context", "Context"],
  ["attention", "Attention"],
  ["timeline", "Timeline"],
  ["safety", "Safety & tools"],
] as const;
type Tab = (typeof TABS)[number][0];

const nextFrame = (fn: () => void): (() => void) => {
  if (typeof requestAnimationFrame === "function") {
    const id = requestAnimationFrame(fn);
    return () => cancelAnimationFrame(id);
  }
  const id = setTimeout(fn, 16);
  return () => clearTimeout(id);
};

function render({ model, el: host }: { model: PanelModel; el: HTMLElement }): () => void {
  const conversation = new Conversation();
  const send = (msg: ViewMessage) => model.send(msg);
  const status = () => String(model.get("status") ?? "idle");
  const controlsHost = {
    send,
    status,
    settings: () => (model.get("settings") ?? {}) as Settings,
    setSettings: (s: Settings) => {
      model.set("settings", s);
      model.save_changes();
    },
  };

  const root = el("div", { class: "cf-root", "data-status": "idle", "data-last-seq": -1 });
  const header = new Header(controlsHost);
  const settingsForm = new SettingsForm(controlsHost);
  const notice = new Notice();
  const chat = new ChatBox(controlsHost);
  const popover = el("div", { class: "cf-popover", hidden: true, "data-testid": "popover" });
  let pinned = false;
  /** The token the popover shows (kept across turn ends, forks and Stop: the user's selection). */
  let popped: { turnId: string; index: number } | null = null;
  let popKey = "";

  // ---- inspector ----
  let tab: Tab = "context";
  let selected: string | null = null; // null: follow the latest turn
  const turnSelect = el("select", { class: "cf-select", "aria-label": "Turn shown in the inspector" });
  const context = new ContextView();
  const background = (): RGB => parseColor(getComputedStyle(root).getPropertyValue("--cf-bg") || "", [255, 255, 255]);
  const attention = new AttentionView(send, background);
  const timelineView = new TimelineView();
  const safetyTab = new SafetyTab();
  const panels: Record<Tab, HTMLElement> = {
    context: context.el,
    attention: attention.el,
    timeline: timelineView.el,
    safety: safetyTab.el,
  };
  const tabButtons = TABS.map(([id, label]) => {
    const b = el("button", {
      class: "cf-tab",
      type: "button",
      role: "tab",
      "data-testid": `tab-${id}`,
      "data-tab": id,
      text: label,
    });
    b.addEventListener("click", () => {
      tab = id;
      dirty = true;
      drawInspector();
    });
    return b;
  });
  turnSelect.addEventListener("change", () => {
    selected = turnSelect.value || null;
    dirty = true;
    drawInspector();
  });
  const panelBox = el("div", { class: "cf-panel" }, ...Object.values(panels));
  const inspector = el(
    "section",
    { class: "cf-inspector" },
    el(
      "div",
      { class: "cf-tabs", role: "tablist" },
      ...tabButtons,
      el("span", { class: "cf-spacer" }),
      el(
        "label",
        { class: "cf-field cf-field-inline" },
        el("span", { class: "cf-field-label", text: "turn" }),
        turnSelect,
      ),
    ),
    panelBox,
  );

  const shownTurn = (): TurnData | null => {
    const id =
      selected && conversation.turns.has(selected) ? selected : conversation.order[conversation.order.length - 1];
    return id ? (conversation.turns.get(id) ?? null) : null;
  };

  let dirty = true;
  let cancelFrame: (() => void) | null = null;
  let lastDraw = 0;
  function drawInspector(): void {
    cancelFrame?.();
    cancelFrame = null;
    lastDraw = Date.now();
    dirty = false;
    for (const b of tabButtons) b.setAttribute("aria-selected", String(b.getAttribute("data-tab") === tab));
    for (const [id, panel] of Object.entries(panels)) panel.hidden = id !== tab;
    const turn = shownTurn();
    attention.setTurn(turn);
    if (!turn) {
      // a new session (or no turn yet): nothing of an earlier turn stays on show
      context.clear();
      timelineView.clear();
      safetyTab.clear();
      return;
    }
    if (tab === "context") context.show(turn);
    else if (tab === "timeline") timelineView.show(turn);
    else if (tab === "safety") safetyTab.show(turn);
    else if (tab === "attention") attention.autoShow();
  }
  /** Heavy views redraw lazily: at most every 200 ms while streaming, only the visible tab. */
  function scheduleInspector(): void {
    dirty = true;
    if (cancelFrame) return;
    const wait = Math.max(0, 200 - (Date.now() - lastDraw));
    const timer = setTimeout(() => {
      cancelFrame = nextFrame(() => dirty && drawInspector());
    }, wait);
    cancelFrame = () => clearTimeout(timer);
  }

  function refreshTurnSelect(): void {
    const turns = conversation.list();
    const keep = selected;
    while (turnSelect.firstChild) turnSelect.removeChild(turnSelect.firstChild);
    turnSelect.appendChild(el("option", { value: "", text: "latest" }));
    turns.forEach((t, i) => {
      const user = summarize(t.events).started?.user ?? "";
      turnSelect.appendChild(
        el("option", {
          value: t.turn_id,
          text: `#${i + 1} ${user.length > 32 ? `${user.slice(0, 31)}…` : user}`,
          selected: t.turn_id === keep,
        }),
      );
    });
  }

  // ---- conversation ----
  const stream = new StreamView({
    hoverToken: (turnId, token, chip) => {
      if (!pinned) showPopover(turnId, token, chip);
      const weights = attention.highlight(turnId, token ? token.index : null);
      if (shownTurn()?.turn_id === turnId) context.shade(weights);
    },
    clickToken: (turnId, token, chip) => {
      pinned = true;
      showPopover(turnId, token, chip);
    },
    selectTurn: (turnId) => {
      if (selected === turnId || turnId === conversation.order[conversation.order.length - 1]) return;
      selected = turnId;
      turnSelect.value = turnId;
      scheduleInspector();
    },
  });

  function canFork(turnId: string): boolean {
    const last = conversation.order[conversation.order.length - 1];
    const turn = conversation.turns.get(turnId);
    return status() !== "generating" && turnId === last && !!turn && !!summarize(turn.events).terminal;
  }

  function showPopover(turnId: string, token: TokenDelta | null, chip: HTMLElement | null): void {
    for (const c of host.querySelectorAll(".cf-tok-selected")) c.classList.remove("cf-tok-selected");
    const turn = conversation.turns.get(turnId);
    if (!token || !chip || !turn) {
      popover.hidden = true;
      popped = null;
      return;
    }
    popped = { turnId, index: token.index };
    popKey = popoverKey(turnId, token.index);
    if (pinned) chip.classList.add("cf-tok-selected");
    const params = summarize(turn.events).started?.params ?? {};
    popover.replaceChildren(
      tokenDetails(token, turn.pieces, {
        canFork: canFork(turnId),
        params,
        onFork: (tokenId) => {
          send({ type: "fork", turn_id: turnId, index: token.index, token_id: tokenId });
          hidePopover();
        },
      }),
    );
    popover.hidden = false;
    const r = chip.getBoundingClientRect();
    const base = root.getBoundingClientRect();
    const width = 360;
    popover.style.left = `${Math.max(4, Math.min(r.left - base.left, base.width - width - 4))}px`;
    popover.style.top = `${r.bottom - base.top + 6}px`;
  }
  function hidePopover(): void {
    pinned = false;
    showPopover("", null, null);
  }
  /** After the conversation changed: the open popover follows its token (its fork buttons appear once the turn
   * has ended), or closes if that turn is gone. */
  function refreshPopover(): void {
    if (!popped || popover.hidden) return;
    const { turnId, index } = popped;
    const chip =
      [...stream.el.querySelectorAll<HTMLElement>(`.cf-tok[data-index="${index}"]`)].find(
        (c) => c.getAttribute("data-turn") === turnId,
      ) ?? null;
    const token = stream.tokenAt(turnId, index) ?? null;
    if (!chip || !token) hidePopover();
    else if (pinned && popKey !== popoverKey(turnId, index)) showPopover(turnId, token, chip); // else: as it is (a
    // button being clicked must not be swapped for a new one)
  }
  /** What the popover's content depends on: its token, and whether it may fork. */
  const popoverKey = (turnId: string, index: number) => `${turnId}|${index}|${canFork(turnId)}`;
  const onDocClick = (ev: MouseEvent) => {
    const t = ev.target as Node;
    if (pinned && !popover.contains(t) && !(t instanceof Element && t.closest(".cf-tok"))) hidePopover();
  };
  const onKey = (ev: KeyboardEvent) => {
    if (ev.key === "Escape" && !popover.hidden) hidePopover();
  };
  document.addEventListener("click", onDocClick);
  root.addEventListener("keydown", onKey);

  let answerView: AnswerView = "text";
  const viewButtons = (["text", "tokens"] as const).map((v) => {
    const b = el("button", {
      class: "cf-seg-btn",
      type: "button",
      "data-testid": `view-${v}`,
      "aria-pressed": String(v === answerView),
      text: v,
      title:
        v === "text"
          ? "Answers as rendered Markdown"
          : "Answers as tokens: hover or click one for what the sampler saw, fork from it",
    });
    b.addEventListener("click", () => {
      answerView = v;
      stream.setView(v);
      for (const o of viewButtons) o.setAttribute("aria-pressed", String(o === b));
      if (v === "text") hidePopover();
    });
    return b;
  });
  const convoBar = el(
    "div",
    { class: "cf-convo-bar" },
    el("span", { class: "cf-muted", text: "answers as" }),
    el("span", { class: "cf-seg", role: "group" }, ...viewButtons),
  );
  const top = el("section", { class: "cf-convo" }, convoBar, stream.el, chat.el);
  root.append(header.el, notice.el, settingsForm.el, el("div", { class: "cf-body" }, top, inspector), popover);
  host.appendChild(root);

  header.settingsToggle.addEventListener("click", () => {
    settingsForm.el.hidden = !settingsForm.el.hidden;
    header.settingsToggle.setAttribute("aria-expanded", String(!settingsForm.el.hidden));
  });

  // ---- traits ----
  function applyChange(change: Change): void {
    stream.update(conversation, change);
    if (change.structure) refreshTurnSelect();
    root.setAttribute("data-last-seq", String(conversation.lastSeq()));
    refreshPopover();
    scheduleInspector();
  }
  function syncTurns(): void {
    const turns = model.get("turns") ?? [];
    const live = model.get("live") ?? null;
    applyChange(conversation.sync(turns, live));
  }
  function syncMeta(): void {
    const info = model.get("model_info") ?? null;
    const st = status();
    header.update(String(model.get("title") ?? ""), String(model.get("session") ?? ""), info, st);
    root.setAttribute("data-status", st);
    chat.update(st, model.get("prewarm") ?? null);
    if (st === "generating") chat.cancelDraft();
    if (info) attention.setModelInfo({ ...info, tools: info.tools ?? [] });
    settingsForm.update((model.get("settings") ?? {}) as Settings, info);
    notice.update(String(model.get("error") ?? ""));
    refreshPopover(); // (its fork buttons depend on the status)
  }
  const onMsg: MessageHandler = (msg: KernelMessage, buffers) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "events") applyChange(conversation.receive(msg.turn_id, msg.events ?? [], msg.pieces ?? {}));
    else if (msg.type === "attention" || msg.type === "attention_error") attention.receive(msg, buffers ?? []);
    else if (msg.type === "prewarmed") chat.update(status(), msg.prewarm);
  };
  const traitNames = ["title", "session", "status", "model_info", "prewarm", "error", "settings"] as const;
  model.on("change:turns", syncTurns);
  model.on("change:live", syncTurns);
  for (const name of traitNames) model.on(`change:${name}`, syncMeta);
  model.on("msg:custom", onMsg);

  syncMeta();
  syncTurns();
  drawInspector();
  const live = model.get("live");
  if (live) send({ type: "resume", turn_id: live.turn_id, after: conversation.turns.get(live.turn_id)?.lastSeq ?? -1 });

  return () => {
    model.off("change:turns", syncTurns);
    model.off("change:live", syncTurns);
    for (const name of traitNames) model.off(`change:${name}`, syncMeta);
    model.off("msg:custom", onMsg);
    document.removeEventListener("click", onDocClick);
    chat.cancelDraft();
    cancelFrame?.();
    root.remove();
  };
}

export default { render };
