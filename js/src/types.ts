/**
 * The widget's synced state and its messages. The kernel's events (`ChatEvent` and the types it carries) are
 * generated from jupyter_chatflow/events.py into events.generated.ts and re-exported here.
 */
import type { ChatEvent, SegmentKind, TurnAccount } from "./events.generated";

export type * from "./events.generated";

/** Token id (as a string) → [readable piece, hex of the token's bytes]. */
export type Pieces = Record<string, [string, string]>;

export interface Prewarm {
  chars: number;
  prompt_tokens: number;
  computed_tokens: number;
  cached_before: number;
  latency_ms: number;
}

/** One finished turn, as the `turns` trait carries it. */
export interface TurnRecord {
  turn_id: string;
  events: ChatEvent[];
  pieces: Pieces;
  prewarm: Prewarm | null;
  fork_of: string;
  /** Its figures, derived once by the kernel from its events (jupyter_chatflow/account): the views read them. */
  account?: TurnAccount | null;
}

export interface LiveRecord {
  turn_id: string;
  prewarm: Prewarm | null;
  fork_of: string;
}

export interface Settings {
  temperature: number;
  top_p: number;
  top_k: number;
  min_p: number;
  repetition_penalty: number;
  max_tokens: number;
  seed: number | null;
  safety: string;
  memory: boolean;
  tools: string[];
  tool_choice: string;
}

export interface ModelInfo {
  name: string;
  layers: number;
  heads: number;
  kv_heads: number;
  context_length: number;
  vocab_size: number;
  tools: string[];
  /** A remote chat's server (its base URL); the numbers above are then 0: the server does not provide them. */
  remote?: string;
  /** The local model's GGUF file ("" when it has none). */
  file?: string;
  /** What its weights were dequantized to ("float32", "bfloat16"). */
  dtype?: string;
  /** One line on what the file is: "name: architecture, parameters, quantization, context; weights as float32, as
   * bfloat16". */
  summary?: string;
  /** The GGUF's `general.architecture` ("llama", "qwen2", "gemma3"…; "" for a remote model). */
  architecture?: string;
  /** The sliding window of the layers in `sliding_layers` (0: the model has none, or it is remote). */
  sliding_window?: number;
  /** The layers that attend only to the last `sliding_window` positions (Gemma 2/3); the others are global. */
  sliding_layers?: number[];
}

export interface AttentionSegment {
  label: string;
  kind: SegmentKind;
  start: number;
  end: number;
}

export interface AttentionMessage {
  type: "attention";
  request_id: string;
  turn_id: string;
  layer: number;
  head: number;
  mode: "tokens" | "segments";
  shape: [number, number];
  dtype: "float16";
  tokens: number | number[];
  prompt_tokens: number;
  pool: number;
  rows_range: [number, number];
  cols_range: [number, number];
  segments: AttentionSegment[];
  /** The layer's sliding window: a query at p sees keys p - window + 1 … p (0 or absent: a global layer). */
  window?: number;
}

/** What the view asks for: the reply's identifying fields, and optionally the block to drill into. */
export type AttentionRequest = Pick<AttentionMessage, "type" | "request_id" | "turn_id" | "layer" | "head" | "mode"> &
  Partial<Pick<AttentionMessage, "rows_range" | "cols_range">>;

export type KernelMessage =
  | { type: "events"; turn_id: string; events: ChatEvent[]; pieces: Pieces; account?: TurnAccount | null }
  | AttentionMessage
  | { type: "attention_error"; request_id: string; message: string }
  | { type: "prewarmed"; prewarm: Prewarm };

export type ViewMessage =
  | { type: "send"; text: string }
  | { type: "stop" }
  | { type: "new_session" }
  | { type: "draft"; text: string }
  | { type: "resume"; turn_id: string; after: number }
  | AttentionRequest
  | { type: "fork"; turn_id: string; index: number; token_id: number }
  | { type: "load_model"; path: string; dtype?: string };

/** The synced traits (the table in js/README.md); `get` gives undefined for one the kernel has not set. */
export interface PanelTraits {
  turns: TurnRecord[];
  live: LiveRecord | null;
  settings: Settings;
  title: string;
  session: string;
  status: string;
  model_info: ModelInfo | null;
  prewarm: Prewarm | null;
  error: string;
  /** While a turn runs: what XLA is compiling now and for how long ("" when nothing is). */
  compiling: string;
  /** While a model chosen in the settings loads: what the file is, then how far the load is ("" otherwise). */
  loading: string;
}

/** How the view receives a kernel → view custom message and its binary buffers. */
export type MessageHandler = (msg: KernelMessage, buffers?: (DataView | ArrayBuffer)[]) => void;
