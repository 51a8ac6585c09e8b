/** The kernel's events and the widget's synced state, mirroring jupyter_chatflow/events.py and js/README.md. */

export interface BaseEvent {
  type: string;
  sequence_number: number;
  turn_id: string;
  /** Monotonic seconds. */
  timestamp: number;
}

export interface Span {
  start: number;
  end: number;
  category: string;
  replacement: string;
}

export interface Segment {
  kind: string;
  label: string;
  tokens: number;
  text: string;
}

export interface Trim {
  label: string;
  tokens: number;
  action: string;
  reason: string;
}

export interface Run {
  segment: number;
  start: number;
  end: number;
}

export interface Snippet {
  memory_id: number;
  text: string;
  score: number;
}

export interface Alternative {
  token_id: number;
  text: string;
  logprob: number;
  /** 0 = cut away by temperature / top-p / top-k / min-p. */
  sampling_prob: number;
}

export interface TurnStarted extends BaseEvent {
  type: "turn_started";
  request_id: string;
  session_id: string;
  user: string;
  params: Record<string, unknown>;
  features: Record<string, unknown>;
  created: number;
  /** A fork: the turn it regenerates, and the index of the token it replaced there. */
  fork_of?: string;
  fork_index?: number;
  /** Milliseconds the request waited for the engine thread (another turn, a title, a prewarm) before it began. */
  queued_ms?: number;
}

export interface SafetyDecision extends BaseEvent {
  type: "safety_decision";
  layer: string;
  action: string;
  guard: string;
  categories: string[];
  scores: Record<string, number>;
  spans: Span[];
  reason: string;
  latency_ms: number;
  replacement: string;
}

export interface MemoryRecalled extends BaseEvent {
  type: "memory_recalled";
  query: string;
  snippets: Snippet[];
  latency_ms: number;
}

export interface ContextAssembled extends BaseEvent {
  type: "context_assembled";
  window: number;
  reserved_output: number;
  budget: number;
  prompt_tokens: number;
  segments: Segment[];
  trimmed: Trim[];
  strategy: string;
  latency_ms: number;
}

export interface Tokenized extends BaseEvent {
  type: "tokenized";
  ids: number[];
  provenance: Run[];
  latency_ms: number;
}

export interface PrefillDone extends BaseEvent {
  type: "prefill";
  prompt_tokens: number;
  reused_tokens: number;
  computed_tokens: number;
  latency_ms: number;
  /** Of latency_ms, the time XLA spent compiling (or loading from its cache) programs new to the process. */
  compile_ms?: number;
}

export interface TokenDelta extends BaseEvent {
  type: "token";
  index: number;
  token_id: number;
  text: string;
  logprob: number;
  entropy: number;
  alternatives: Alternative[];
  elapsed_ms: number;
  /** XLA compile time since the previous token (a decode program's first call in the process), in elapsed_ms. */
  compile_ms?: number;
  redacted: boolean;
}

export interface ToolCall extends BaseEvent {
  type: "tool_call";
  call_id: string;
  name: string;
  arguments: Record<string, unknown>;
  constrained: boolean;
}

export interface ToolResult extends BaseEvent {
  type: "tool_result";
  call_id: string;
  name: string;
  output: string;
  error: string;
  latency_ms: number;
}

export interface MemoryWritten extends BaseEvent {
  type: "memory_written";
  operation: string;
  text: string;
  memory_ids: number[];
}

export interface TitleGenerated extends BaseEvent {
  type: "title_generated";
  title: string;
  latency_ms: number;
  /** model (the model's attempt) | fallback (the user's first words). Comes after the terminal event. */
  source?: string;
}

export interface Completed extends BaseEvent {
  type: "completed";
  finish_reason: string;
  text: string;
  usage: Record<string, number>;
  timings: Record<string, number>;
  tokens_per_s: number;
}

export interface Cancelled extends BaseEvent {
  type: "cancelled";
  text: string;
  usage: Record<string, number>;
  timings: Record<string, number>;
}

export interface Failed extends BaseEvent {
  type: "error";
  error: string;
  message: string;
  text: string;
}

export type ChatEvent =
  | TurnStarted
  | SafetyDecision
  | MemoryRecalled
  | ContextAssembled
  | Tokenized
  | PrefillDone
  | TokenDelta
  | ToolCall
  | ToolResult
  | MemoryWritten
  | TitleGenerated
  | Completed
  | Cancelled
  | Failed;

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
}

export interface AttentionSegment {
  label: string;
  kind: string;
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
}

/** What the view asks for: the reply's identifying fields, and optionally the block to drill into. */
export type AttentionRequest = Pick<AttentionMessage, "type" | "request_id" | "turn_id" | "layer" | "head" | "mode"> &
  Partial<Pick<AttentionMessage, "rows_range" | "cols_range">>;

export type KernelMessage =
  | { type: "events"; turn_id: string; events: ChatEvent[]; pieces: Pieces }
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
  | { type: "fork"; turn_id: string; index: number; token_id: number };

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
}

/** How the view receives a kernel → view custom message and its binary buffers. */
export type MessageHandler = (msg: KernelMessage, buffers?: (DataView | ArrayBuffer)[]) => void;
