/**
 * The inspector beside the conversation: a tab per view (context, attention, timeline, safety & tools) of one
 * turn, the latest unless one is picked. Heavy views redraw lazily while a turn streams: at most every
 * REDRAW_MS, and only the visible tab.
 */
import type { RGB } from "../colormap";
import { clear, el } from "../dom";
import { type Conversation, summarize, type TurnData } from "../state";
import type { AttentionErrorMessage, AttentionMessage, ModelInfo, ViewMessage } from "../types";
import { AttentionView } from "../views/attention";
import { ContextView, type PromptLens } from "../views/context";
import { InterveneView } from "../views/intervene";
import { SafetyTab } from "../views/safety_tab";
import { TimelineView } from "../views/timeline";
import { isRemote, WireView } from "../views/wire";

const TABS = [
  ["context", "Context"],
  ["attention", "Attention"],
  ["timeline", "Timeline"],
  ["safety", "Safety & tools"],
  ["wire", "Wire"],
  ["why", "Why"],
] as const;
type Tab = (typeof TABS)[number][0];

const REDRAW_MS = 200;
/** A user message longer than this is cut in the turn picker. */
const LABEL_CHARS = 32;

type AttentionReply = AttentionMessage | AttentionErrorMessage;

/** Runs `fn` on the next animation frame (a 16 ms timer where there is none); returns the cancel. */
function nextFrame(fn: () => void): () => void {
  if (typeof requestAnimationFrame === "function") {
    const id = requestAnimationFrame(fn);
    return () => cancelAnimationFrame(id);
  }
  const id = setTimeout(fn, 16);
  return () => clearTimeout(id);
}

export class Inspector {
  readonly el: HTMLElement;
  private tab: Tab = "context";
  /** The turn picked in the turn select; null: follow the latest turn. */
  private selected: string | null = null;
  private turnSelect = el("select", { class: "cf-select", "aria-label": "Turn shown in the inspector" });
  private context = new ContextView();
  private attention: AttentionView;
  private intervene: InterveneView;
  /** What the panel is doing ("idle", "generating", "loading"): a turn is answered again only while idle. */
  private status = "idle";
  private timeline = new TimelineView();
  private safety = new SafetyTab();
  private wire = new WireView();
  /** Shown instead of the heatmap for a remote turn. */
  private remoteAttention = el("div", {
    class: "cf-empty cf-remote-note",
    "data-testid": "remote-attention",
    text: "The remote server does not provide attention weights: they are the model's internals, which the Chat Completions API does not send.",
  });
  private panels: Record<Tab, HTMLElement>;
  private tabButtons: HTMLButtonElement[];
  private dirty = true;
  private cancelFrame: (() => void) | null = null;
  private lastDraw = 0;

  /** `need(turnId)`: the turn is picked; the panel asks for its events if it has none. */
  constructor(
    private conversation: Conversation,
    send: (msg: ViewMessage) => void,
    background: () => RGB,
    private need: (turnId: string) => void = () => {},
    why: HTMLElement = el("div", {}),
  ) {
    this.attention = new AttentionView(send, background);
    this.intervene = new InterveneView(send);
    const { context, attention, timeline, safety, wire } = this;
    const attentionBox = el("div", {}, this.remoteAttention, attention.el, this.intervene.el);
    this.panels = {
      context: context.el,
      attention: attentionBox,
      timeline: timeline.el,
      safety: safety.el,
      wire: wire.el,
      why, // (the "why this token?" of a token's popover draws there: panel/inside.ts)
    };
    this.tabButtons = TABS.map(([id, label]) => this.tabButton(id, label));
    this.turnSelect.addEventListener("change", () => {
      this.selected = this.turnSelect.value || null;
      if (this.selected) this.need(this.selected);
      this.draw();
    });
    this.el = el("section", { class: "cf-inspector" }, this.tabBar(), this.panelBox());
  }

  private tabButton(id: Tab, label: string): HTMLButtonElement {
    const attrs = { class: "cf-tab", type: "button", role: "tab", "data-testid": `tab-${id}`, "data-tab": id };
    const button = el("button", { ...attrs, text: label });
    button.addEventListener("click", () => {
      this.tab = id;
      this.draw();
    });
    return button;
  }

  private tabBar(): HTMLElement {
    const picker = el(
      "label",
      { class: "cf-field cf-field-inline" },
      el("span", { class: "cf-field-label", text: "turn" }),
      this.turnSelect,
    );
    // the tabs stay on one line (a narrow panel scrolls them); the picker goes under them, whole, when they fill it
    return el(
      "div",
      { class: "cf-tabs" },
      el("div", { class: "cf-tab-list", role: "tablist" }, ...this.tabButtons),
      el("span", { class: "cf-spacer" }),
      picker,
    );
  }

  private panelBox(): HTMLElement {
    return el("div", { class: "cf-panel" }, ...Object.values(this.panels));
  }

  /** Shows a tab (the Why tab when a token's popover asked why). */
  showTab(tab: Tab): void {
    this.tab = tab;
    this.draw();
  }

  /** The turn on show: the picked one while it exists, else the latest (null when there is none). */
  shownTurn(): TurnData | null {
    const { turns, order } = this.conversation;
    const id = this.selected && turns.has(this.selected) ? this.selected : order[order.length - 1];
    return id ? (turns.get(id) ?? null) : null;
  }

  /** Draws the visible tab now (and cancels a scheduled redraw). */
  draw(): void {
    this.cancelFrame?.();
    this.cancelFrame = null;
    this.lastDraw = Date.now();
    this.dirty = false;
    for (const b of this.tabButtons) b.setAttribute("aria-selected", String(b.getAttribute("data-tab") === this.tab));
    for (const [id, panel] of Object.entries(this.panels)) panel.hidden = id !== this.tab;
    const turn = this.shownTurn();
    const remote = !!turn && isRemote(turn.events);
    this.remoteAttention.hidden = !remote;
    this.attention.el.hidden = remote;
    this.intervene.el.hidden = remote;
    this.attention.setTurn(remote ? null : turn);
    const { order } = this.conversation;
    this.intervene.setTurn(remote ? null : turn, !!turn && turn.turn_id === order[order.length - 1], this.status);
    if (turn) this.drawTab(turn);
    else this.clearTabs();
  }

  private drawTab(turn: TurnData): void {
    if (this.tab === "context") this.context.show(turn);
    else if (this.tab === "timeline") this.timeline.show(turn);
    else if (this.tab === "safety") this.safety.show(turn);
    else if (this.tab === "wire") this.wire.show(turn);
    else if (this.tab === "attention" && !isRemote(turn.events)) this.attention.autoShow();
  }

  /** A new session (or no turn yet): nothing of an earlier turn stays on show. */
  private clearTabs(): void {
    this.context.clear();
    this.timeline.clear();
    this.safety.clear();
    this.wire.clear();
  }

  /** Redraws lazily: on the next frame at least REDRAW_MS after the last draw; one pending redraw at a time. */
  schedule(): void {
    this.dirty = true;
    if (this.cancelFrame) return;
    const wait = Math.max(0, REDRAW_MS - (Date.now() - this.lastDraw));
    const timer = setTimeout(() => {
      this.cancelFrame = nextFrame(() => this.dirty && this.draw());
    }, wait);
    this.cancelFrame = () => clearTimeout(timer);
  }

  /** Lists the conversation's turns in the turn select ("latest" first), keeping the pick. */
  refreshTurns(): void {
    clear(this.turnSelect);
    this.turnSelect.appendChild(el("option", { value: "", text: "latest" }));
    this.conversation.list().forEach((turn, i) => {
      const user = summarize(turn.events).started?.user ?? turn.row?.user ?? "";
      const text = `#${i + 1} ${user.length > LABEL_CHARS ? `${user.slice(0, LABEL_CHARS - 1)}…` : user}`;
      this.turnSelect.appendChild(
        el("option", { value: turn.turn_id, text, selected: turn.turn_id === this.selected }),
      );
    });
  }

  /** Shows a turn clicked in the conversation (the latest one is followed already: nothing changes). */
  pick(turnId: string): void {
    const { order } = this.conversation;
    if (this.selected === turnId || turnId === order[order.length - 1]) return;
    this.selected = turnId;
    this.turnSelect.value = turnId;
    this.schedule();
  }

  /** A token chip is hovered (index null: left): marks its attention row, shades the prompt by its weights. */
  hoverToken(turnId: string, index: number | null): void {
    const weights = this.attention.highlight(turnId, index);
    if (this.shownTurn()?.turn_id === turnId) this.context.shade(weights);
  }

  /** The lens over a turn's last prompt, for the Context tab (null: none, or the shading is off). */
  setPromptLens(turnId: string, lens: PromptLens | null): void {
    this.context.setPromptLens(turnId, lens);
  }

  setModelInfo(info: ModelInfo): void {
    this.attention.setModelInfo(info);
    this.intervene.setModelInfo(info);
  }

  /** The panel's status: the Attention tab's "answer again" buttons wait while a turn generates. */
  setStatus(status: string): void {
    if (status === this.status) return;
    this.status = status;
    this.schedule();
  }

  /** A reply to an attention request (any view's: the attention view keeps only its own). */
  receive(msg: AttentionReply, buffers: (DataView | ArrayBuffer)[]): void {
    this.attention.receive(msg, buffers);
  }

  dispose(): void {
    this.cancelFrame?.();
  }
}
