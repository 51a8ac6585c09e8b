/**
 * The whole panel: header, error notice, settings, the conversation with its chat box, the inspector and the
 * token popover, kept in step with the model's traits and the kernel's messages (see js/README.md). A turn's events
 * come once, by message: live while it runs, or when this view asks for the ones it lacks (`fetch`: a reload, a
 * second view of the widget, a turn picked before its events came).
 */
import { parseColor, type RGB } from "../colormap";
import { el } from "../dom";
import { type Change, Conversation } from "../state";
import type { MessageHandler } from "../types";
import { type AnswersBar, answersBar } from "../views/answers_bar";
import { ChatBox, type ControlsHost, Header, Notice, SettingsForm } from "../views/controls";
import { type StreamHooks, StreamView } from "../views/stream";
import { InsideLooks } from "./inside";
import { Inspector } from "./inspector";
import { controlsHost, type PanelModel, subscribe } from "./model";
import { TokenPopover } from "./popover";

/** How long a view waits for the events it asked for before its turns say the kernel did not answer (a notebook
saved with its widgets' state, opened with no kernel running: the rows came from the saved state). */
export const FETCH_WAIT_MS = 10_000;

export class Panel {
  readonly root = el("div", { class: "cf-root", "data-status": "idle", "data-last-seq": -1 });
  private conversation = new Conversation();
  private controls: ControlsHost;
  private header: Header;
  private settingsForm: SettingsForm;
  private notice = new Notice();
  private chat: ChatBox;
  private inspector: Inspector;
  private stream: StreamView;
  private popover: TokenPopover;
  private inside: InsideLooks;
  private answers: AnswersBar;
  private unsubscribe: () => void;
  /** The turns whose events this view has asked the kernel for. */
  private asked = new Set<string>();
  /** The kernel's last `request_error` (shown in the notice while the `error` trait says nothing). */
  private requestError = "";
  /** Runs out FETCH_WAIT_MS after the first `fetch`: turns still without events then say the kernel did not answer. */
  private fetchWait: ReturnType<typeof setTimeout> | null = null;

  /** Draws the panel into `host` from the model's traits; a view that starts mid-turn asks for what it missed. */
  constructor(
    private model: PanelModel,
    host: HTMLElement,
  ) {
    this.controls = controlsHost(model);
    this.header = new Header(this.controls);
    this.settingsForm = new SettingsForm(this.controls);
    this.chat = new ChatBox(this.controls);
    this.inside = new InsideLooks({
      conversation: this.conversation,
      send: this.controls.send,
      lensChanged: (turnId) => this.lensChanged(turnId),
      lensProgress: (turnId, text) => this.lensProgress(turnId, text),
      openWhy: () => this.inspector.showTab("why"),
    });
    this.inspector = new Inspector(
      this.conversation,
      this.controls.send,
      () => this.background(),
      (turnId) => this.need(turnId, true),
      this.inside.whyView.el,
    );
    this.stream = new StreamView(this.streamHooks());
    this.answers = answersBar(
      (view) => {
        this.stream.setView(view);
        if (view === "text") this.popover.hide();
      },
      (on) => {
        this.stream.setLensShading(on);
        this.inside.setShading(on);
      },
    );
    const { root, conversation, stream, controls, inside } = this;
    this.popover = new TokenPopover({
      root,
      conversation,
      stream,
      status: controls.status,
      send: controls.send,
      inside,
    });
    this.layout(host);
    this.wireSettingsToggle();
    this.unsubscribe = subscribe(model, {
      turns: () => this.syncTurns(),
      meta: () => this.syncMeta(),
      message: this.onMessage,
    });
    this.syncMeta();
    this.syncTurns();
    this.inspector.draw();
    this.resume();
  }

  /** Removes the panel and everything it listens to. */
  dispose(): void {
    if (this.fetchWait !== null) clearTimeout(this.fetchWait);
    this.unsubscribe();
    this.popover.dispose();
    this.chat.cancelDraft();
    this.inspector.dispose();
    this.root.remove();
  }

  private layout(host: HTMLElement): void {
    const { answers } = this;
    const convo = el("section", { class: "cf-convo" }, answers.el, answers.legend, this.stream.el, this.chat.el);
    const body = el("div", { class: "cf-body" }, convo, this.inspector.el);
    this.root.append(this.header.el, this.notice.el, this.settingsForm.el, body, this.popover.el);
    host.appendChild(this.root);
  }

  /** The header's settings button shows and hides the settings form. */
  private wireSettingsToggle(): void {
    const { settingsToggle } = this.header;
    const form = this.settingsForm.el;
    settingsToggle.addEventListener("click", () => {
      form.hidden = !form.hidden;
      settingsToggle.setAttribute("aria-expanded", String(!form.hidden));
    });
  }

  /** Token chips: hovering one shows its popover and its attention row, a click pins the popover; a click on a
   * turn shows it in the inspector. */
  private streamHooks(): StreamHooks {
    return {
      hoverToken: (turnId, token, chip) => {
        this.popover.hover(turnId, token, chip);
        this.inspector.hoverToken(turnId, token ? token.index : null);
      },
      clickToken: (turnId, token, chip) => {
        this.popover.pin(turnId, token, chip);
        if (this.inside.shading) this.inside.requestLens(turnId); // (its lens, for the popover and the chips)
      },
      selectTurn: (turnId) => {
        this.inspector.pick(turnId);
        this.need(turnId, true);
      },
    };
  }

  /** The theme's background, for the heatmap's colour ramp (white when the theme sets none). */
  private background(): RGB {
    return parseColor(getComputedStyle(this.root).getPropertyValue("--cf-bg") || "", [255, 255, 255]);
  }

  /** After the conversation changed (a trait or a batch of events): the views follow. */
  private applyChange(change: Change): void {
    this.stream.update(this.conversation, change);
    if (change.structure) this.inspector.refreshTurns();
    this.root.setAttribute("data-last-seq", String(this.conversation.lastSeq()));
    this.popover.refresh();
    this.inspector.schedule();
    this.inside.follow(); // (with the lens shading on: a turn that just ended is lensed)
  }

  /** A turn's lens arrived, failed or was asked for: its chips' shading, the open popover and the bar follow. */
  private lensChanged(turnId: string): void {
    const lens = this.inside.lensOf(turnId);
    const settled = lens ? new Map(lens.msg.indices.map((index, n) => [index, lens.msg.settled[n]])) : null;
    this.stream.setLens(turnId, settled, lens?.msg.layers ?? 0);
    const turn = this.conversation.turns.get(turnId);
    const prompt =
      lens && this.inside.shading
        ? {
            top: lens.msg.prompt_top,
            settled: lens.msg.prompt_settled,
            logprobs: lens.promptLogprobs,
            layers: lens.msg.layers,
            pieces: { ...turn?.pieces, ...lens.msg.pieces },
          }
        : null;
    this.inspector.setPromptLens(turnId, prompt);
    this.popover.refresh();
    this.lensProgress(turnId, this.inside.lensStatus(turnId));
  }

  /** The bar under the answers says how far the latest turn's lens is. */
  private lensProgress(turnId: string, text: string): void {
    const { order } = this.conversation;
    if (turnId !== order[order.length - 1]) return;
    const lens = this.inside.lensOf(turnId);
    const done = lens
      ? `The latest answer's lens: ${(lens.msg.compute_ms / 1000).toFixed(1)} s, of which XLA compiling ${(lens.msg.compile_ms / 1000).toFixed(1)} s (the lens's reader: once per kernel)`
      : "";
    this.answers.setLensStatus(text || done, text.startsWith("The lens failed"));
  }

  private syncTurns(): void {
    this.applyChange(this.conversation.sync(this.model.get("turns") ?? [], this.model.get("live") ?? null));
    for (const turnId of this.conversation.lacking()) this.need(turnId);
  }

  /** Asks the kernel for the events of a finished turn this view has none of: once, or again when the user picks
   * it (`again`: a reply that never came). */
  private need(turnId: string, again = false): void {
    const turn = this.conversation.turns.get(turnId);
    if (!turn || turn.events.length || turnId === this.conversation.liveId || (this.asked.has(turnId) && !again))
      return;
    this.asked.add(turnId);
    this.controls.send({ type: "fetch", turn_id: turnId, after: -1 });
    this.fetchWait ??= setTimeout(() => this.stream.setUnanswered(), FETCH_WAIT_MS);
  }

  private syncMeta(): void {
    const { model, chat } = this;
    const info = model.get("model_info") ?? null;
    const status = this.controls.status();
    this.header.update(String(model.get("title") ?? ""), String(model.get("session") ?? ""), info, status);
    this.root.setAttribute("data-status", status);
    chat.update(status, model.get("prewarm") ?? null);
    if (status === "generating") chat.cancelDraft();
    if (info) this.inspector.setModelInfo({ ...info, tools: info.tools ?? [] });
    this.inspector.setStatus(status);
    this.settingsForm.update(this.controls.settings(), info);
    this.settingsForm.model.update(info, String(model.get("loading") ?? ""), status);
    this.notice.update(String(model.get("error") ?? "") || this.requestError);
    this.stream.setCompiling(String(model.get("compiling") ?? ""));
    this.popover.refresh(); // (its fork buttons depend on the status)
  }

  /** Kernel → view: a batch of a turn's events, an attention reply, a prewarm's result, a request refused. */
  private onMessage: MessageHandler = (msg, buffers) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "events") {
      this.applyChange(this.conversation.receive(msg.turn_id, msg.events ?? [], msg.pieces ?? {}, msg.account));
    } else if (msg.type === "attention" || msg.type === "attention_error") {
      this.inspector.receive(msg, buffers ?? []);
    } else if (
      msg.type === "lens" ||
      msg.type === "why" ||
      msg.type === "inside_progress" ||
      msg.type === "inside_error"
    ) {
      this.inside.receive(msg, buffers ?? []);
    } else if (msg.type === "prewarmed") {
      this.chat.update(this.controls.status(), msg.prewarm);
    } else if (msg.type === "request_error") {
      console.warn(`jupyter_chatflow: the kernel refused the panel's ${msg.request || "message"}: ${msg.message}`);
      this.requestError = msg.message;
      this.syncMeta();
    }
  };

  /** A view that starts while a turn streams asks for the events it has not got (a reload loses no tokens). */
  private resume(): void {
    const live = this.model.get("live");
    if (!live) return;
    const after = this.conversation.turns.get(live.turn_id)?.lastSeq ?? -1;
    this.controls.send({ type: "fetch", turn_id: live.turn_id, after });
  }
}
