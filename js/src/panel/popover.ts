/**
 * The token popover: what the sampler saw for a token chip (hovering shows it, a click pins it) and, on the latest
 * finished turn, the buttons that fork the answer from that token with one of its alternatives.
 */
import { el } from "../dom";
import { type Conversation, summarize } from "../state";
import type { TokenDelta, ViewMessage } from "../types";
import type { StreamView } from "../views/stream";
import { tokenDetails } from "../views/token_details";
import { isRemote } from "../views/wire";

/** The room (px) the popover's left edge keeps from the panel's right edge, besides a 4 px margin. */
const WIDTH = 360;

export interface PopoverHost {
  /** The panel's root: the popover is placed relative to it, and Escape inside it closes the popover. */
  root: HTMLElement;
  conversation: Conversation;
  stream: StreamView;
  status(): string;
  send(msg: ViewMessage): void;
}

export class TokenPopover {
  readonly el = el("div", { class: "cf-popover", hidden: true, "data-testid": "popover" });
  private pinned = false;
  /** The token shown (kept across turn ends, forks and Stop: the user's selection). */
  private popped: { turnId: string; index: number } | null = null;
  /** What the content was drawn for (see `key`). */
  private drawnKey = "";

  constructor(private host: PopoverHost) {
    document.addEventListener("click", this.onDocumentClick);
    host.root.addEventListener("keydown", this.onKey);
  }

  /** A chip is hovered (token and chip null: left): shown unless one is pinned. */
  hover(turnId: string, token: TokenDelta | null, chip: HTMLElement | null): void {
    if (!this.pinned) this.show(turnId, token, chip);
  }

  /** A chip is clicked: shown, pinned and marked selected until closed. */
  pin(turnId: string, token: TokenDelta, chip: HTMLElement): void {
    this.pinned = true;
    this.show(turnId, token, chip);
  }

  hide(): void {
    this.pinned = false;
    this.show("", null, null);
  }

  /** After the conversation or the status changed: the open popover follows its token (its fork buttons appear
   * once the turn has ended), or closes if that turn is gone. */
  refresh(): void {
    if (!this.popped || this.el.hidden) return;
    const { turnId, index } = this.popped;
    const chips = this.host.stream.el.querySelectorAll<HTMLElement>(`.cf-tok[data-index="${index}"]`);
    const chip = [...chips].find((c) => c.getAttribute("data-turn") === turnId) ?? null;
    const token = this.host.stream.tokenAt(turnId, index) ?? null;
    if (!chip || !token) this.hide();
    // else: as it is, unless what it shows changed (a button being clicked must not be swapped for a new one)
    else if (this.pinned && this.drawnKey !== this.key(turnId, index)) this.show(turnId, token, chip);
  }

  dispose(): void {
    document.removeEventListener("click", this.onDocumentClick);
    this.host.root.removeEventListener("keydown", this.onKey);
  }

  private show(turnId: string, token: TokenDelta | null, chip: HTMLElement | null): void {
    for (const c of this.host.root.querySelectorAll(".cf-tok-selected")) c.classList.remove("cf-tok-selected");
    const turn = this.host.conversation.turns.get(turnId);
    if (!token || !chip || !turn) {
      this.el.hidden = true;
      this.popped = null;
      return;
    }
    this.popped = { turnId, index: token.index };
    this.drawnKey = this.key(turnId, token.index);
    if (this.pinned) chip.classList.add("cf-tok-selected");
    const onFork = (tokenId: number) => {
      this.host.send({ type: "fork", turn_id: turnId, index: token.index, token_id: tokenId });
      this.hide();
    };
    const params = summarize(turn.events).started?.params ?? {};
    this.el.replaceChildren(tokenDetails(token, turn.pieces, { canFork: this.canFork(turnId), params, onFork }));
    this.el.hidden = false;
    this.place(chip);
  }

  /** Below the chip, inside the panel. */
  private place(chip: HTMLElement): void {
    const r = chip.getBoundingClientRect();
    const base = this.host.root.getBoundingClientRect();
    this.el.style.left = `${Math.max(4, Math.min(r.left - base.left, base.width - WIDTH - 4))}px`;
    this.el.style.top = `${r.bottom - base.top + 6}px`;
  }

  /** Only the latest turn forks, once it has ended and nothing is generating. */
  private canFork(turnId: string): boolean {
    const { order, turns } = this.host.conversation;
    const turn = turns.get(turnId);
    const latest = turnId === order[order.length - 1];
    const remote = !!turn && isRemote(turn.events); // forking needs the local model's cache
    return this.host.status() !== "generating" && latest && !!turn && !remote && !!summarize(turn.events).terminal;
  }

  /** What the content depends on: its token, and whether it may fork. */
  private key(turnId: string, index: number): string {
    return `${turnId}|${index}|${this.canFork(turnId)}`;
  }

  private onDocumentClick = (ev: MouseEvent): void => {
    const t = ev.target as Node;
    if (this.pinned && !this.el.contains(t) && !(t instanceof Element && t.closest(".cf-tok"))) this.hide();
  };

  private onKey = (ev: KeyboardEvent): void => {
    if (ev.key === "Escape" && !this.el.hidden) this.hide();
  };
}
