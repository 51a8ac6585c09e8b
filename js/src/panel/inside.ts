/**
 * The panel's looks inside a finished turn (issue 36): the lens over an answer (asked for when the answers bar's
 * "lens" shading is on, for the latest finished turn and for any turn whose token is clicked), and "why this
 * token?" from a token's popover (its reply drawn in the Why tab). Replies, progress and errors come by message
 * (`lens`, `why`, `inside_progress`, `inside_error`); this view keeps the lenses it asked for, one per turn, and the
 * why on show. A remote turn is never asked about: its weights are on the server.
 */
import { el } from "../dom";
import { type Conversation, summarize, type TurnData } from "../state";
import type {
  InsideErrorMessage,
  InsideMethod,
  InsideProgressMessage,
  LensMessage,
  TokenDelta,
  ViewMessage,
  WhyMessage,
} from "../types";
import { type Buffer, decodeLens, type Lens, lensPanel, messageEndNote, tokenLens } from "../views/lens";
import { IG_STEPS, WhyView } from "../views/why";
import { isRemote } from "../views/wire";

export type InsideReply = LensMessage | WhyMessage | InsideProgressMessage | InsideErrorMessage;

export interface InsideHost {
  conversation: Conversation;
  send(msg: ViewMessage): void;
  /** A turn's lens arrived, failed or moved on: the chips' shading and an open popover follow. */
  lensChanged(turnId: string): void;
  /** A why was asked for: the inspector shows the Why tab. */
  openWhy(): void;
  /** A turn's lens is on its way (`text`: how far, in words). */
  lensProgress?(turnId: string, text: string): void;
}

/** Where a turn's lens stands. */
type LensState =
  | { kind: "pending"; requestId: string; text: string }
  | { kind: "ready"; lens: Lens }
  | { kind: "failed"; message: string };

export const REMOTE_INSIDE =
  "A remote server's turn: its weights are on the server, so the lens and “why” cannot look inside it.";
export const LIVE_INSIDE = "The lens and “why this token?” look inside a turn once it has ended.";

export class InsideLooks {
  /** Whether the answers' chips are shaded by the lens. */
  shading = false;
  readonly whyView: WhyView;
  private lenses = new Map<string, LensState>();
  /** Per turn, a count that grows with each change of its lens (the popover redraws on a new one). */
  private versions = new Map<string, number>();
  /** Per turn, the status lines drawn (they follow its lens's progress in place). */
  private statusNodes = new Map<string, Set<HTMLElement>>();
  private whyRequest = "";
  private whyTurn = "";
  private whyIndex = -1;
  private counter = 0;

  constructor(private host: InsideHost) {
    this.whyView = new WhyView({ ask: (method, contrast) => this.why(this.whyTurn, this.whyIndex, method, contrast) });
  }

  /** Whether a turn can be looked into now: "" when it can, else why not. */
  cannot(turn: TurnData | undefined): string {
    if (!turn) return "This turn is not in the panel any more.";
    if (isRemote(turn.events)) return REMOTE_INSIDE;
    if (!summarize(turn.events).terminal) return LIVE_INSIDE;
    return "";
  }

  lensOf(turnId: string): Lens | null {
    const state = this.lenses.get(turnId);
    return state?.kind === "ready" ? state.lens : null;
  }

  /** What the lens of a turn is doing, in words ("" when it is there, or was never asked for). */
  lensStatus(turnId: string): string {
    const state = this.lenses.get(turnId);
    if (state?.kind === "pending") return `Lens: ${state.text}`;
    if (state?.kind === "failed") return `The lens failed: ${state.message}`;
    return "";
  }

  version(turnId: string): number {
    return this.versions.get(turnId) ?? 0;
  }

  /** Asks for a turn's lens unless it is here, coming, or cannot be had (again after a failure when `retry`). */
  requestLens(turnId: string, retry = false): void {
    const state = this.lenses.get(turnId);
    if (state && (state.kind !== "failed" || !retry)) return;
    if (this.cannot(this.host.conversation.turns.get(turnId))) return;
    const request_id = this.nextId("lens");
    this.lenses.set(turnId, { kind: "pending", requestId: request_id, text: "asking the kernel…" });
    this.host.send({ type: "lens", request_id, turn_id: turnId });
    this.bump(turnId);
  }

  /** Turns the shading on or off; on, the latest finished turn's lens is asked for. */
  setShading(on: boolean): void {
    this.shading = on;
    this.follow();
    for (const id of this.lenses.keys()) this.host.lensChanged(id);
  }

  /** While the shading is on, the latest finished turn's lens is asked for (after each turn's end). */
  follow(): void {
    if (!this.shading) return;
    const { order, turns } = this.host.conversation;
    const latest = order[order.length - 1];
    if (latest && !this.cannot(turns.get(latest))) this.requestLens(latest);
  }

  /** Asks why answer token `index` of `turnId` (rather than `contrast`), and shows the Why tab. */
  why(turnId: string, index: number, method: InsideMethod = "grad_x_input", contrast: number | null = null): void {
    const turn = this.host.conversation.turns.get(turnId);
    const token = turn ? summarize(turn.events).tokens.find((t) => t.index === index) : undefined;
    if (!turn || !token || this.cannot(turn)) return;
    const request_id = this.nextId("why");
    this.whyRequest = request_id;
    this.whyTurn = turnId;
    this.whyIndex = index;
    const msg: ViewMessage = { type: "why", request_id, turn_id: turnId, index, method };
    if (contrast !== null) msg.contrast_token_id = contrast;
    if (method === "integrated_gradients") msg.steps = IG_STEPS;
    this.host.send(msg);
    const number = this.host.conversation.order.indexOf(turnId) + 1;
    this.whyView.asked({
      turnId,
      turnLabel: `#${number}`,
      index,
      tokenId: token.token_id,
      text: token.text,
      alternatives: token.alternatives,
      pieces: turn.pieces,
      method,
      contrast,
    });
    this.host.openWhy();
  }

  /** A kernel message of these looks (the others' requests are ignored: every view receives every reply). */
  receive(msg: InsideReply, buffers: readonly Buffer[]): void {
    if (msg.type === "lens") {
      const turnId = this.pendingTurn(msg.request_id);
      if (turnId === null) return;
      try {
        this.lenses.set(turnId, { kind: "ready", lens: decodeLens(msg, buffers) });
      } catch (error) {
        this.lenses.set(turnId, { kind: "failed", message: String(error) });
      }
      this.bump(turnId);
    } else if (msg.type === "why") {
      if (msg.request_id === this.whyRequest) this.whyView.show(msg);
    } else if (msg.request === "lens") {
      const turnId = this.pendingTurn(msg.request_id);
      if (turnId === null) return;
      if (msg.type === "inside_error") {
        this.lenses.set(turnId, { kind: "failed", message: msg.message });
        this.bump(turnId);
        return;
      }
      this.lenses.set(turnId, { kind: "pending", requestId: msg.request_id, text: progressText(msg) });
      // in place: a popover's buttons are not swapped for new ones at every tick of the clock
      for (const node of this.statusNodes.get(turnId) ?? []) node.textContent = this.lensStatus(turnId);
      this.host.lensProgress?.(turnId, this.lensStatus(turnId));
    } else if (msg.request_id === this.whyRequest) {
      if (msg.type === "inside_error") this.whyView.failed(msg.message);
      else this.whyView.showProgress(msg);
    }
  }

  /** The look section of a token's popover: the why action and the lens (or the button that asks for it). */
  section(turnId: string, token: TokenDelta): HTMLElement {
    const turn = this.host.conversation.turns.get(turnId);
    const cannot = this.cannot(turn);
    if (cannot) return el("div", { class: "cf-muted cf-look-note", "data-testid": "look-note", text: cannot });
    const why = el("button", {
      class: "cf-btn cf-btn-primary",
      type: "button",
      "data-testid": "why-this",
      title: "Which tokens of the prompt made this one: grad × input, in the Why tab",
      text: "Why this token?",
    });
    why.addEventListener("click", () => this.why(turnId, token.index));
    const lens = this.lensOf(turnId);
    const status = this.lensStatus(turnId);
    const actions = el("div", { class: "cf-row cf-look-actions" }, why);
    if (!lens && !this.lenses.has(turnId)) {
      const ask = el("button", {
        class: "cf-btn",
        type: "button",
        "data-testid": "lens-ask",
        title: "Read each layer's residual through the output head (computed now: a few seconds)",
        text: "Lens: what each layer predicted",
      });
      ask.addEventListener("click", () => this.requestLens(turnId));
      actions.appendChild(ask);
    } else if (this.lenses.get(turnId)?.kind === "failed") {
      const again = el("button", {
        class: "cf-btn",
        type: "button",
        "data-testid": "lens-ask",
        text: "Lens: try again",
      });
      again.addEventListener("click", () => this.requestLens(turnId, true));
      actions.appendChild(again);
    }
    const failed = this.lenses.get(turnId)?.kind === "failed";
    const parts: (HTMLElement | null)[] = [actions];
    if (status) {
      const line = el("div", {
        class: failed ? "cf-error-text" : "cf-muted cf-thinking",
        "data-testid": "lens-status",
        text: status,
      });
      this.statusLine(turnId, line);
      parts.push(line);
    }
    const mine = lens ? tokenLens(lens, token.index) : null;
    if (lens && mine) {
      const pieces = { ...turn?.pieces, ...lens.msg.pieces };
      parts.push(lensPanel(mine, pieces, messageEndNote(lens, token.index, token.token_id, pieces)));
    } else if (lens)
      parts.push(
        el("div", { class: "cf-muted", text: "This token has no lens (it came before the turn's last prompt)." }),
      );
    return el("div", { class: "cf-look", "data-testid": "look" }, ...parts);
  }

  /** A line that says how far a turn's lens is (kept while it is in the page). */
  statusLine(turnId: string, line: HTMLElement): void {
    const lines = this.statusNodes.get(turnId) ?? new Set();
    for (const old of lines) if (!old.isConnected) lines.delete(old);
    this.statusNodes.set(turnId, lines.add(line));
  }

  /** A new session: nothing of the old turns stays. */
  clear(): void {
    this.lenses.clear();
    this.versions.clear();
    this.statusNodes.clear();
  }

  private pendingTurn(requestId: string): string | null {
    for (const [turnId, state] of this.lenses)
      if (state.kind === "pending" && state.requestId === requestId) return turnId;
    return null;
  }

  private bump(turnId: string): void {
    this.versions.set(turnId, this.version(turnId) + 1);
    this.host.lensChanged(turnId);
  }

  private nextId(kind: string): string {
    return `${kind}-${Date.now().toString(36)}-${++this.counter}`;
  }
}

/** A progress message in words, with the seconds so far. */
export function progressText(msg: InsideProgressMessage): string {
  return `${msg.text} · ${(msg.elapsed_ms / 1000).toFixed(1)} s`;
}
