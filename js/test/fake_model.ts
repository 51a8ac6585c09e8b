/**
 * A minimal anywidget model for tests and the harness: traits, change events, custom messages, sent log; and the
 * kernel's side of the finished turns. Give it whole records (events, pieces, account) in `turns`: its trait holds
 * their rows, as the kernel's does, and it answers a view's `fetch` with the record's events, as the kernel does.
 */
import type { PanelModel } from "../src/index";
import type {
  ChatEvent,
  FetchRequest,
  PanelTraits,
  Pieces,
  Prewarm,
  TurnAccount,
  TurnRow,
  ViewMessage,
} from "../src/types";

/** Any handler: the model passes it whatever arguments its event carries. */
type Callback = (...args: never[]) => void;

/** A finished turn whole, as a view holds it once its events came (the fixtures, the recorded turns): its row's
 * fields (what a fixture lacks of them is derived from its events), its events, their pieces, its account. */
export type TurnRecord = Partial<TurnRow> & {
  turn_id: string;
  events: ChatEvent[];
  pieces: Pieces;
  prewarm?: Prewarm | null;
  fork_of?: string;
  account?: TurnAccount | null;
};

/** A record's row in the `turns` trait, as the kernel makes it (turn_rows.row); a row stays as it is. */
export function rowOf(record: TurnRecord | TurnRow): TurnRow {
  if (!("events" in record)) return record;
  const started = record.events.find((e) => e.type === "turn_started");
  const completed = record.events.find((e) => e.type === "completed");
  const terminal = record.events.find((e) => e.type === "completed" || e.type === "cancelled" || e.type === "error");
  const a = record.account ?? null;
  const user = started?.type === "turn_started" ? started.user : "";
  return {
    turn_id: record.turn_id,
    fork_of: record.fork_of ?? (started?.type === "turn_started" ? started.fork_of : ""),
    prewarm: record.prewarm ?? null,
    user: user.length <= 200 ? user : `${user.slice(0, 199)}…`,
    status: a?.status ?? (terminal ? (terminal.type as TurnRow["status"]) : "live"),
    finish_reason: completed?.type === "completed" ? completed.finish_reason : "",
    answer_tokens: a?.answer_tokens ?? 0,
    call_tokens: a?.call_tokens ?? 0,
    tokens_per_s: a?.tokens_per_s ?? null,
    ttft_ms: a?.ttft_ms ?? null,
    generated_note: a?.generated_note ?? "",
  };
}

export class FakeModel implements PanelModel {
  sent: { content: ViewMessage; buffers?: unknown }[] = [];
  saves = 0;
  private handlers = new Map<string, Set<Callback>>();
  onSend: ((content: ViewMessage) => void) | null = null;
  /** The finished turns' records, kernel side: what a `fetch` is answered from. */
  records = new Map<string, TurnRecord>();
  /** Whether `fetch` is answered (at once, as part of the send); off: the test answers, or not. */
  answersFetch = true;

  constructor(public traits: Record<string, unknown>) {
    if (Array.isArray(traits.turns)) traits.turns = this.keep(traits.turns);
  }

  get<K extends keyof PanelTraits>(name: K): PanelTraits[K] | undefined {
    return this.traits[name] as PanelTraits[K] | undefined;
  }
  set(name: string, value: unknown): void {
    this.traits[name] = name === "turns" && Array.isArray(value) ? this.keep(value) : value;
    this.emit(`change:${name}`);
  }
  /** Keeps each record kernel side; the trait gets their rows. */
  private keep(turns: (TurnRecord | TurnRow)[]): TurnRow[] {
    for (const t of turns) if ("events" in t) this.records.set(t.turn_id, t);
    return turns.map(rowOf);
  }
  /** The kernel's reply to a `fetch`: the record's events after `after`, its pieces and account. */
  answer(request: FetchRequest): void {
    const record = this.records.get(request.turn_id);
    const live = (this.traits.live as { turn_id: string } | null)?.turn_id === request.turn_id;
    if (!record && live) {
      this.message({ type: "events", turn_id: request.turn_id, events: [], pieces: {}, account: null });
      return;
    }
    if (!record) {
      const message = `no turn ${JSON.stringify(request.turn_id)} in this panel`;
      this.message({ type: "request_error", request: "fetch", message });
      return;
    }
    const events = record.events.filter((e) => e.sequence_number > request.after);
    const { turn_id, pieces, account } = record;
    this.message({ type: "events", turn_id, events, pieces, account: account ?? null });
  }
  /** The `fetch` requests the view sent. */
  fetches(): FetchRequest[] {
    return this.sent.map((s) => s.content).filter((c): c is FetchRequest => c.type === "fetch");
  }
  save_changes(): void {
    this.saves += 1;
  }
  on(name: string, cb: Callback): void {
    const handlers = this.handlers.get(name) ?? new Set();
    this.handlers.set(name, handlers.add(cb));
  }
  off(name?: string | null, cb?: Callback | null): void {
    if (!name) this.handlers.clear();
    else if (!cb) this.handlers.delete(name);
    else this.handlers.get(name)?.delete(cb);
  }
  send(content: ViewMessage, _callbacks?: unknown, buffers?: unknown): void {
    this.sent.push({ content, buffers });
    if (content.type === "fetch" && this.answersFetch) this.answer(content);
    this.onSend?.(content);
  }
  emit(name: string, ...args: unknown[]): void {
    for (const cb of [...(this.handlers.get(name) ?? [])]) (cb as (...a: unknown[]) => void)(...args);
  }
  /** Delivers a kernel → view custom message. */
  message(msg: unknown, buffers: (DataView | ArrayBuffer)[] = []): void {
    this.emit("msg:custom", msg, buffers);
  }
  listeners(name: string): number {
    return this.handlers.get(name)?.size ?? 0;
  }
}

export const MODEL_INFO = {
  name: "SmolLM2-360M-Instruct",
  layers: 32,
  heads: 15,
  kv_heads: 5,
  context_length: 8192,
  vocab_size: 49152,
  tools: ["calculator", "python"],
};
export const SETTINGS = {
  temperature: 0.2,
  top_p: 0.9,
  top_k: 0,
  min_p: 0,
  repetition_penalty: 1.1,
  max_tokens: 256,
  seed: 1,
  safety: "all",
  memory: true,
  tools: ["calculator"],
  tool_choice: "auto",
};

export function baseTraits(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    turns: [],
    live: null,
    settings: { ...SETTINGS },
    title: "",
    session: "default",
    status: "idle",
    model_info: MODEL_INFO,
    prewarm: null,
    error: "",
    compiling: "",
    loading: "",
    ...extra,
  };
}
