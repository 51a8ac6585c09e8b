/** A minimal anywidget model for tests and the harness: traits, change events, custom messages, sent log. */
import type { PanelModel } from "../src/index";
import type { PanelTraits, ViewMessage } from "../src/types";

/** Any handler: the model passes it whatever arguments its event carries. */
type Callback = (...args: never[]) => void;

export class FakeModel implements PanelModel {
  sent: { content: ViewMessage; buffers?: unknown }[] = [];
  saves = 0;
  private handlers = new Map<string, Set<Callback>>();
  onSend: ((content: ViewMessage) => void) | null = null;

  constructor(public traits: Record<string, unknown>) {}

  get<K extends keyof PanelTraits>(name: K): PanelTraits[K] | undefined {
    return this.traits[name] as PanelTraits[K] | undefined;
  }
  set(name: string, value: unknown): void {
    this.traits[name] = value;
    this.emit(`change:${name}`);
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
