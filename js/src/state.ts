/**
 * The panel's model of the conversation: turns listed by the `turns` trait (rows: ids and figures, no events) and
 * the `live` one, their events from `events` messages (live, or the kernel's reply to a `fetch`), merged by sequence
 * number (duplicates and re-sent batches are ignored), plus pure derivations of what each view draws from a turn's
 * events.
 */
import type {
  ChatEvent,
  ContextAssembled,
  LiveTurn,
  Pieces,
  PrefillDone,
  Prewarm,
  SafetyDecision,
  TokenDelta,
  Tokenized,
  ToolCall,
  ToolResult,
  TurnAccount,
  TurnRow,
  TurnStarted,
} from "./types";

export interface TurnData {
  turn_id: string;
  /** Sorted by sequence number, no duplicates. */
  events: ChatEvent[];
  seqs: Set<number>;
  pieces: Pieces;
  prewarm: Prewarm | null;
  fork_of: string;
  /** Highest sequence number held (-1: none). */
  lastSeq: number;
  /** The turn's figures as the kernel derived them (the latest: from the most events); null until one came. */
  account: TurnAccount | null;
  /** Its row in the `turns` trait once it has ended (what is drawn before its events come); null while live. */
  row: TurnRow | null;
}

export interface Merge {
  /** The events that were new, in sequence order. */
  added: ChatEvent[];
  /** True when every new event came after all held ones (a view can append instead of redrawing). */
  appended: boolean;
}

export function createTurn(record: { turn_id: string; prewarm?: Prewarm | null; fork_of?: string }): TurnData {
  return {
    turn_id: record.turn_id,
    events: [],
    seqs: new Set(),
    pieces: {},
    prewarm: record.prewarm ?? null,
    fork_of: record.fork_of ?? "",
    lastSeq: -1,
    account: null,
    row: null,
  };
}

/** Keeps the account derived from the most events (a message that arrives late never rolls it back). */
export function takeAccount(turn: TurnData, account: TurnAccount | null | undefined): boolean {
  if (!account || (turn.account && turn.account.events > account.events)) return false;
  turn.account = account;
  return true;
}

/** Adds the events `turn` doesn't hold yet (by sequence number) and the pieces; says what was new. */
export function mergeEvents(turn: TurnData, events: readonly ChatEvent[], pieces: Pieces = {}): Merge {
  Object.assign(turn.pieces, pieces);
  const added: ChatEvent[] = [];
  for (const event of events) {
    const seq = event.sequence_number;
    if (turn.seqs.has(seq)) continue;
    turn.seqs.add(seq);
    added.push(event);
  }
  added.sort((a, b) => a.sequence_number - b.sequence_number);
  const appended = added.length === 0 || added[0].sequence_number > turn.lastSeq;
  if (appended) turn.events.push(...added);
  else turn.events = [...turn.events, ...added].sort((a, b) => a.sequence_number - b.sequence_number);
  if (added.length) turn.lastSeq = Math.max(turn.lastSeq, added[added.length - 1].sequence_number);
  return { added, appended };
}

/** What changed in a conversation after a sync or a message. */
export interface Change {
  /** Turns whose events were merged in order: the new events, for appending. */
  appended: Map<string, ChatEvent[]>;
  /** Turns to draw from scratch (new, or events arrived out of order). */
  redraw: Set<string>;
  /** True when turns were added, removed or reordered. */
  structure: boolean;
  /** Turns whose account changed with no new event (its figures are redrawn, nothing else). */
  figures: Set<string>;
}

function emptyChange(): Change {
  return { appended: new Map(), redraw: new Set(), structure: false, figures: new Set() };
}

/** All turns of the session in order: the finished ones from `turns`, then the live one. */
export class Conversation {
  turns = new Map<string, TurnData>();
  order: string[] = [];
  liveId: string | null = null;

  /** Brings the conversation in line with the `turns` and `live` traits (a row's events come by message: see
   * `lacking`). */
  sync(rows: readonly TurnRow[], live: LiveTurn | null): Change {
    const change = emptyChange();
    const order = rows.map((r) => r.turn_id);
    if (live && !order.includes(live.turn_id)) order.push(live.turn_id);
    for (const id of [...this.turns.keys()]) if (!order.includes(id)) this.turns.delete(id);
    for (const row of rows) {
      const turn = this.ensure(row, change);
      turn.prewarm = row.prewarm ?? null;
      turn.fork_of = row.fork_of ?? "";
      if (!turn.row || JSON.stringify(turn.row) !== JSON.stringify(row)) {
        turn.row = row;
        if (!change.redraw.has(row.turn_id)) change.figures.add(row.turn_id); // (the footer reads it until an account)
      }
    }
    if (live) {
      const turn = this.ensure(live, change);
      turn.prewarm = live.prewarm ?? turn.prewarm;
      turn.fork_of = live.fork_of ?? turn.fork_of;
    }
    if (order.join("\n") !== this.order.join("\n")) change.structure = true;
    this.order = order;
    this.liveId = live ? live.turn_id : null;
    return change;
  }

  /** The finished turns whose events this view has none of (it opened after they ended): to ask the kernel for. */
  lacking(): string[] {
    return this.order.filter((id) => id !== this.liveId && this.turns.get(id)?.events.length === 0);
  }

  /** Merges a batch of a turn's events (an `events` message) and the account of the turn so far. */
  receive(turn_id: string, events: readonly ChatEvent[], pieces: Pieces, account?: TurnAccount | null): Change {
    const change = emptyChange();
    if (!this.turns.has(turn_id)) {
      this.order.push(turn_id);
      change.structure = true;
    }
    this.absorb({ turn_id }, events, pieces, change, account);
    return change;
  }

  private ensure(record: { turn_id: string; prewarm?: Prewarm | null; fork_of?: string }, change: Change): TurnData {
    let turn = this.turns.get(record.turn_id);
    if (!turn) {
      turn = createTurn(record);
      this.turns.set(record.turn_id, turn);
      change.redraw.add(record.turn_id);
      change.structure = true;
    }
    return turn;
  }

  private absorb(
    record: { turn_id: string; prewarm?: Prewarm | null; fork_of?: string },
    events: readonly ChatEvent[],
    pieces: Pieces,
    change: Change,
    account?: TurnAccount | null,
  ): void {
    const turn = this.ensure(record, change);
    if (record.prewarm !== undefined) turn.prewarm = record.prewarm;
    if (record.fork_of !== undefined) turn.fork_of = record.fork_of;
    const merge = mergeEvents(turn, events, pieces);
    if (takeAccount(turn, account) && !merge.added.length) change.figures.add(turn.turn_id);
    if (!merge.added.length || change.redraw.has(turn.turn_id)) return;
    if (!merge.appended) {
      change.redraw.add(turn.turn_id);
      change.appended.delete(turn.turn_id);
      return;
    }
    change.appended.set(turn.turn_id, [...(change.appended.get(turn.turn_id) ?? []), ...merge.added]);
  }

  list(): TurnData[] {
    return this.order.map((id) => this.turns.get(id)).filter((t): t is TurnData => t !== undefined);
  }

  /** The ids of turns replaced by a fork. */
  superseded(): Set<string> {
    const out = new Set<string>();
    for (const turn of this.turns.values()) if (turn.fork_of) out.add(turn.fork_of);
    return out;
  }

  /** The highest sequence number of the live turn, else of the last turn (-1 when none). */
  lastSeq(): number {
    const id = this.liveId ?? this.order[this.order.length - 1];
    return id ? (this.turns.get(id)?.lastSeq ?? -1) : -1;
  }
}

// ---- derivations: a turn's events → what the views draw --------------------------------------------------------

export interface ToolCard {
  call: ToolCall;
  result: ToolResult | null;
  /** The number of answer tokens before the call: the card goes between token `afterTokens - 1` and the next. */
  afterTokens: number;
}

export interface Round {
  assembled: ContextAssembled;
  tokenized: Tokenized | null;
  prefill: PrefillDone | null;
}

export interface TurnSummary {
  started: TurnStarted | null;
  tokens: TokenDelta[];
  tools: ToolCard[];
  safety: SafetyDecision[];
  rounds: Round[];
  terminal: ChatEvent | null;
  title: string;
}

/** What the views draw of a turn, from its events in sequence order. */
export function summarize(events: readonly ChatEvent[]): TurnSummary {
  const out: TurnSummary = { started: null, tokens: [], tools: [], safety: [], rounds: [], terminal: null, title: "" };
  const calls = new Map<string, ToolCard>();
  for (const e of events) {
    if (e.type === "tool_call" || e.type === "tool_result") addTool(out, calls, e);
    else if (e.type === "context_assembled" || e.type === "tokenized" || e.type === "prefill")
      addToRound(out.rounds, e);
    else addOther(out, e);
  }
  return out;
}

/** A call gets a card where the answer stands (after its tokens so far); its result fills the card in. */
function addTool(out: TurnSummary, calls: Map<string, ToolCard>, e: ToolCall | ToolResult): void {
  if (e.type === "tool_call") {
    const card = { call: e, result: null, afterTokens: out.tokens.length };
    calls.set(e.call_id, card);
    out.tools.push(card);
  } else {
    const card = calls.get(e.call_id);
    if (card) card.result = e;
  }
}

/** A context starts a round (a prompt); its tokenization and prefill belong to the last one. */
function addToRound(rounds: Round[], e: ContextAssembled | Tokenized | PrefillDone): void {
  if (e.type === "context_assembled") {
    rounds.push({ assembled: e, tokenized: null, prefill: null });
    return;
  }
  const last = rounds[rounds.length - 1];
  if (!last) return;
  if (e.type === "tokenized") last.tokenized = e;
  else last.prefill = e;
}

function addOther(out: TurnSummary, e: ChatEvent): void {
  switch (e.type) {
    case "turn_started":
      out.started = e;
      break;
    case "token":
      out.tokens.push(e);
      break;
    case "safety_decision":
      out.safety.push(e);
      break;
    case "title_generated":
      out.title = e.title;
      break;
    case "completed":
    case "cancelled":
    case "error":
      out.terminal = e;
      break;
    default:
      break;
  }
}

/** The text the answer shows: the tokens' visible text, or the terminal event's text (e.g. a block message). */
export function answerText(summary: TurnSummary): string {
  const streamed = summary.tokens.map((t) => t.text).join("");
  const final = summary.terminal && "text" in summary.terminal ? summary.terminal.text : "";
  return streamed || final;
}

/** The block decision of a turn, if a layer blocked it. */
export function blockOf(summary: TurnSummary): SafetyDecision | null {
  return summary.safety.find((d) => d.action === "block") ?? null;
}

// ---- the exact prompt -----------------------------------------------------------------------------------------

export interface PromptToken {
  position: number;
  id: number;
  text: string;
  hex: string;
  kind: string;
  segment: number;
  special: boolean;
}

const SPECIAL = /^<\|[^|]*\|>$|^<\/?s>$/;

/** The prompt ids with their pieces and the kind of the segment each came from. */
export function promptTokens(tokenized: Tokenized, assembled: ContextAssembled | null, pieces: Pieces): PromptToken[] {
  const segOf = new Int32Array(tokenized.ids.length).fill(-1);
  for (const run of tokenized.provenance) segOf.fill(run.segment, run.start, Math.min(run.end, segOf.length));
  return tokenized.ids.map((id, position) => {
    const [text, hex] = pieces[String(id)] ?? [`#${id}`, ""];
    const segment = segOf[position];
    const kind = assembled?.segments[segment]?.kind ?? "template";
    return { position, id, text, hex, kind, segment, special: SPECIAL.test(text) };
  });
}
