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
import type { InsideLooks } from "./inside";

/** The gap (px) between the popover and its chip. */
const GAP = 6;
/** The room (px) the popover keeps from the edges of the window. */
const MARGIN = 8;

export interface PopoverHost {
  /** The panel's root: Escape inside it closes the popover (which is placed against it where it cannot be raised
   * above the page: see `raise`). */
  root: HTMLElement;
  conversation: Conversation;
  stream: StreamView;
  status(): string;
  send(msg: ViewMessage): void;
  /** The looks inside a finished turn: the popover's lens and "why" section. */
  inside: InsideLooks;
}

export class TokenPopover {
  readonly el = el("div", { class: "cf-popover", hidden: true, popover: "manual", "data-testid": "popover" });
  private pinned = false;
  /** The chip it points at while shown (followed when the page or the answer scrolls). */
  private chip: HTMLElement | null = null;
  /** The token shown (kept across turn ends, forks and Stop: the user's selection). */
  private popped: { turnId: string; index: number } | null = null;
  /** What the content was drawn for (see `key`). */
  private drawnKey = "";

  constructor(private host: PopoverHost) {
    document.addEventListener("click", this.onDocumentClick);
    host.root.addEventListener("keydown", this.onKey);
    window.addEventListener("scroll", this.onMove, true); // (capture: the answer's own scrolling too)
    window.addEventListener("resize", this.onMove);
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
    window.removeEventListener("scroll", this.onMove, true);
    window.removeEventListener("resize", this.onMove);
    raise(this.el, false);
  }

  private show(turnId: string, token: TokenDelta | null, chip: HTMLElement | null): void {
    for (const c of this.host.root.querySelectorAll(".cf-tok-selected")) c.classList.remove("cf-tok-selected");
    const turn = this.host.conversation.turns.get(turnId);
    if (!token || !chip || !turn) {
      this.el.hidden = true;
      raise(this.el, false);
      this.popped = this.chip = null;
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
    const { inside } = this.host;
    const looks = !inside.cannot(turn);
    const whyRather = looks ? (tokenId: number) => inside.why(turnId, token.index, "grad_x_input", tokenId) : null;
    const look = inside.section(turnId, token);
    // with its lens, the popover is two columns wide (the token and what the sampler saw | the lens), so neither is
    // scrolled out of a window's height; without, the look's buttons follow the alternatives
    const wide = look.querySelector("[data-testid=lens-panel]") !== null;
    const options = { canFork: this.canFork(turnId), params, onFork, whyRather, extra: wide ? null : look };
    const details = tokenDetails(token, turn.pieces, options);
    this.el.classList.toggle("cf-popover-wide", wide);
    this.el.replaceChildren(wide ? el("div", { class: "cf-pop-cols" }, details, look) : details);
    this.el.hidden = false;
    this.chip = chip;
    raise(this.el, true);
    this.place(chip);
  }

  /** Wholly inside the window whatever clips the panel, never over its chip (`spot`). */
  private place(chip: HTMLElement): void {
    const view = { width: document.documentElement.clientWidth, height: window.innerHeight };
    this.el.style.maxHeight = "";
    const { width, height } = this.el.getBoundingClientRect();
    const spotted = spot(chip.getBoundingClientRect(), { width, height }, view);
    if (spotted.height < height) this.el.style.maxHeight = `${spotted.height}px`;
    const origin = isRaised(this.el) ? { left: 0, top: 0 } : this.host.root.getBoundingClientRect();
    this.el.style.left = `${spotted.left - origin.left}px`;
    this.el.style.top = `${spotted.top - origin.top}px`;
  }

  /** Only the latest turn forks, once it has ended and nothing is generating. */
  private canFork(turnId: string): boolean {
    const { order, turns } = this.host.conversation;
    const turn = turns.get(turnId);
    const latest = turnId === order[order.length - 1];
    const remote = !!turn && isRemote(turn.events); // forking needs the local model's cache
    return this.host.status() !== "generating" && latest && !!turn && !remote && !!summarize(turn.events).terminal;
  }

  /** What the content depends on: its token, whether it may fork, and how far its turn's lens is. */
  private key(turnId: string, index: number): string {
    const turn = this.host.conversation.turns.get(turnId);
    const looks = this.host.inside.cannot(turn);
    return `${turnId}|${index}|${this.canFork(turnId)}|${looks}|${this.host.inside.version(turnId)}`;
  }

  private onDocumentClick = (ev: MouseEvent): void => {
    const t = ev.target as Node;
    // (the path as dispatched: a button inside that redrew the popover, e.g. the lens's, is no longer in it)
    const inside = ev.composedPath().includes(this.el) || this.el.contains(t);
    if (this.pinned && !inside && !(t instanceof Element && t.closest(".cf-tok"))) this.hide();
  };

  private onKey = (ev: KeyboardEvent): void => {
    if (ev.key === "Escape" && !this.el.hidden) this.hide();
  };

  /** The page or the answer scrolled, or the window changed size: the popover follows its chip while the chip
   * can be seen (scrolled out of the answer's view, it stays where it was). */
  private onMove = (ev: Event): void => {
    if (this.el.hidden || !this.chip || (ev.target instanceof Node && this.el.contains(ev.target))) return;
    if (!this.chip.isConnected) {
      this.hide();
      return;
    }
    const chip = this.chip.getBoundingClientRect();
    const answers = this.host.stream.el.getBoundingClientRect();
    if (chip.bottom > answers.top && chip.top < answers.bottom) this.place(this.chip);
  };
}

interface Box {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/** Where a popover of `size` goes for a chip at `chip` (window coordinates), and how high it may be: below the
 * chip, else above it, else beside it (right, else left) as high as the window lets it; in a window too small for
 * all of these, on the roomier side above or below, as high as that room (it scrolls inside). Always inside the
 * window, never over the chip (a popover over its chip would take the hover that shows it). */
export function spot(
  chip: Box,
  size: { width: number; height: number },
  view: { width: number; height: number },
): { left: number; top: number; height: number } {
  const x = (left: number) => Math.max(MARGIN, Math.min(left, view.width - size.width - MARGIN));
  const below = view.height - MARGIN - chip.bottom - GAP;
  const above = chip.top - GAP - MARGIN;
  const { height } = size;
  if (height <= below) return { left: x(chip.left), top: chip.bottom + GAP, height };
  if (height <= above) return { left: x(chip.left), top: chip.top - GAP - height, height };
  const top = Math.max(MARGIN, Math.min((chip.top + chip.bottom - height) / 2, view.height - height - MARGIN));
  if (height <= view.height - 2 * MARGIN) {
    if (chip.right + GAP + size.width <= view.width - MARGIN) return { left: chip.right + GAP, top, height };
    if (chip.left - GAP - size.width >= MARGIN) return { left: chip.left - GAP - size.width, top, height };
  }
  const room = Math.max(below, above, 0);
  return { left: x(chip.left), top: below >= above ? chip.bottom + GAP : chip.top - GAP - room, height: room };
}

/** Shows (or hides) the popover in the browser's top layer (the Popover API), where neither the panel's own
 * `overflow: hidden` nor a notebook's scrolled output area can cut it. Where the API is missing (an old browser,
 * jsdom), it stays an absolutely placed child of the panel. */
function raise(popover: HTMLElement, open: boolean): void {
  if (typeof popover.showPopover !== "function" || !popover.isConnected) return;
  if (open && !isRaised(popover)) popover.showPopover();
  else if (!open && isRaised(popover)) popover.hidePopover();
}

function isRaised(popover: HTMLElement): boolean {
  return typeof popover.showPopover === "function" && popover.matches(":popover-open");
}
