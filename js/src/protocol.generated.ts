// Generated from jupyter_chatflow/frontends/panel/protocol.py (and the options of settings.py) by
// jupyter_chatflow/frontends/panel/ts_types.py: do not edit.
// After changing the protocol, regenerate it: python -m jupyter_chatflow.frontends.panel.ts_types
// (tests/frontends/panel/test_ts_types.py fails while this file is out of date).

import type { AccountStatus, ChatEvent, SegmentKind, TrimStrategy, TurnAccount } from "./events.generated";

/** What the panel is doing: nothing; a turn generates; a model chosen in the settings loads. */
export type PanelStatus = "idle" | "generating" | "loading";

/** An attention map's columns: key positions, or the prompt's segments (each cell the attention mass on one). */
export type AttentionMode = "tokens" | "segments";

/**
 * Token id (as a string) → [readable piece, hex of the token's bytes]: every prompt id, generated id and alternative of
 * the events it comes with.
 */
export type Pieces = Record<string, [string, string]>;

/** A draft's prompt put into the prompt cache before it is sent (see `Chat.prewarm`). */
export interface Prewarm {
  chars: number;
  prompt_tokens: number;
  computed_tokens: number;
  /** Prompt tokens already cached before the prewarm: a turn that reuses more than these used the prewarm. */
  cached_before: number;
  latency_ms: number;
}

/**
 * The panel's settings: one per option of a turn (`settings.OPTIONS`), which a turn sent from the panel takes as its
 * options (null: the option's default).
 */
export interface Settings {
  /** Divides the logits: lower is more predictable; 0 always takes the most likely token. */
  temperature: number;
  /** Keep only the k most likely tokens. */
  top_k: number;
  /** Nucleus sampling: keep the smallest set of tokens whose probability sums to at least p. */
  top_p: number;
  /** Drop tokens less likely than min_p times the most likely one; 0 keeps all. */
  min_p: number;
  /** Make tokens already in the answer less likely (a chat counts its answer alone). */
  repetition_penalty: number;
  /** The longest answer, in tokens. */
  max_tokens: number;
  /** Stop as soon as the answer contains one of these strings (not included in the answer). */
  stop: string[];
  /** Seed of the random stream: the same seed and prompt give the same answer; unset picks one. */
  seed: number | null;
  /** Keep generating past the model's stop tokens (for benchmarks: always exactly max_tokens). */
  ignore_eos: boolean;
  /** Tools the model may call: NAME[,NAME…] (calculator, variable, remember, recall, python). */
  tools: string[];
  /** auto | none | required | a tool's name, as in the OpenAI API. */
  tool_choice: string;
  /** Recall memories into the context and act on 'remember that …' / 'forget …'. */
  memory: boolean;
  /** Safety layers: off | input (scan only what the user sends) | all (input, model, output, tool). */
  safety: "off" | "input" | "all";
  /** How old turns leave a full window: drop them, or summarize them with the model. */
  trim: TrimStrategy;
  /** The most call → run → resume rounds in one turn. */
  max_tool_rounds: number;
}

/** The name of a number option of `settings.py`: a key of the panel's `Settings` that the form edits. */
export type SettingFieldKey =
  | "temperature"
  | "top_k"
  | "top_p"
  | "min_p"
  | "repetition_penalty"
  | "max_tokens"
  | "seed";

/** A number field of the panel's settings form: one sampler option of `settings.py`. */
export interface SettingField {
  key: SettingFieldKey;
  label: string;
  min?: number;
  max?: number;
  step: number;
  /** What a special value means, or what the option does (the field's tooltip). */
  hint: string;
  /** Empty is allowed: the option's default (the seed: a random one). */
  optional: boolean;
}

export const SETTING_FIELDS: readonly SettingField[] = [
  { key: "temperature", label: "temperature", min: 0, step: 0.05, hint: "0 is greedy", optional: false },
  { key: "top_k", label: "top k", min: 0, step: 1, hint: "0 keeps all tokens", optional: false },
  {
    key: "top_p",
    label: "top p",
    min: 0,
    max: 1,
    step: 0.05,
    hint: "Nucleus sampling: keep the smallest set of tokens whose probability sums to at least p.",
    optional: false,
  },
  {
    key: "min_p",
    label: "min p",
    min: 0,
    max: 1,
    step: 0.05,
    hint: "Drop tokens less likely than min_p times the most likely one; 0 keeps all.",
    optional: false,
  },
  { key: "repetition_penalty", label: "repetition penalty", min: 0, step: 0.05, hint: "1 is off", optional: false },
  { key: "max_tokens", label: "max tokens", min: 1, step: 1, hint: "The longest answer, in tokens.", optional: false },
  {
    key: "seed",
    label: "seed",
    min: 0,
    max: 4294967295,
    step: 1,
    hint: "Seed of the random stream: the same seed and prompt give the same answer; unset picks one.",
    optional: true,
  },
];

/**
 * A finished turn as the `turns` trait holds it: what a view draws before it has the turn's events, and what it needs
 * to ask for them. The events, their pieces and the whole account come in an `events` message.
 */
export interface TurnRow {
  turn_id: string;
  /** The turn this one regenerated from one of its tokens ("" unless it is a fork). */
  fork_of: string;
  /** The draft's prewarm that ran before the turn (None when none did). */
  prewarm: Prewarm | null;
  /** The user's message, cut at `USER_CHARS` characters (the turn picker's label). */
  user: string;
  status: AccountStatus;
  /** Why a completed turn ended ("" for a turn that did not complete). */
  finish_reason: string;
  answer_tokens: number;
  call_tokens: number;
  tokens_per_s: number | null;
  ttft_ms: number | null;
  /** Every token the turn generated, named (the footer's tooltip). */
  generated_note: string;
}

/** The `live` trait: the turn now generating (its events come as `events` messages). */
export interface LiveTurn {
  turn_id: string;
  prewarm: Prewarm | null;
  fork_of: string;
}

/** The `model_info` trait: what the header, the settings and the attention view say about the model. */
export interface ModelInfo {
  name: string;
  /** 0 for a remote model, as are the other sizes: the server does not say how its model is built. */
  layers: number;
  heads: number;
  kv_heads: number;
  context_length: number;
  vocab_size: number;
  /** The tools a turn may enable (the settings' checkboxes). */
  tools: string[];
  /** A remote chat's server (its base URL); "" for a local model. */
  remote: string;
  /** The local model's GGUF file ("" when it has none, or it is remote). */
  file: string;
  /** What its weights were dequantized to ("float32", "bfloat16"; "" for a remote model). */
  dtype: string;
  /** One line on what the file is: "name: architecture, parameters, quantization, context; weights as …". */
  summary: string;
  /** The GGUF's `general.architecture` ("llama", "qwen2", "gemma3"…; "" for a remote model). */
  architecture: string;
  /** The sliding window of the layers in `sliding_layers` (0: the model has none, or it is remote). */
  sliding_window: number;
  /** The layers that attend only to the last `sliding_window` positions (Gemma 2/3); the others are global. */
  sliding_layers: number[];
}

/** The widget's synced traits (`ChatWidget`'s), as a view reads them; a reload gets them all. */
export interface PanelTraits {
  /** The finished turns, oldest first, from this panel or any other sender on the chat. */
  turns: TurnRow[];
  live: LiveTurn | null;
  /** The view edits them (`model.set` + `save_changes`); a turn sent from the panel uses them. */
  settings: Settings;
  /** The session's title ("" until the model wrote one). */
  title: string;
  session: string;
  status: PanelStatus;
  model_info: ModelInfo;
  /** The last draft's prewarm (the box under the input shows it). */
  prewarm: Prewarm | null;
  /** The last problem with a request from the panel (one line, names the fix); "" when none. */
  error: string;
  /** While a turn runs: what XLA is compiling now and for how long ("" when nothing is). */
  compiling: string;
  /** While a model chosen in the settings loads: what the file is, then how far the load is ("" otherwise). */
  loading: string;
}

/** Start a turn with the panel's settings (refused while one generates). */
export interface SendRequest {
  type: "send";
  text: string;
}

/** Stop the live turn between two decode steps (it ends with a `cancelled` event). */
export interface StopRequest {
  type: "stop";
}

/** Archive the session and start an empty one (the panel clears its turns). */
export interface NewSessionRequest {
  type: "new_session";
}

/** The box's text, ~400 ms after typing stopped: the kernel prefills the prompt it would make. */
export interface DraftRequest {
  type: "draft";
  text: string;
}

/**
 * Send the events of turn `turn_id` after sequence number `after` (-1: all), with their pieces and the turn's account,
 * in an `events` message: a view asks for what it lacks (the live turn's after a reload mid-stream, a finished turn's
 * it never received).
 */
export interface FetchRequest {
  type: "fetch";
  turn_id: string;
  after: number;
}

/**
 * One layer's attention over a finished turn; the reply is an `attention` (or `attention_error`) message with the same
 * `request_id`.
 */
export interface AttentionRequest {
  type: "attention";
  request_id: string;
  turn_id: string;
  layer: number;
  /** A head, or -1: the mean over heads. */
  head: number;
  mode: AttentionMode;
  /** The query positions to cover (left out: all): a segment cell clicked to drill down. */
  rows_range?: [number, number] | null;
  cols_range?: [number, number] | null;
}

/** Regenerate the answer of turn `turn_id` from its token `index`, with `token_id` in its place. */
export interface ForkRequest {
  type: "fork";
  turn_id: string;
  index: number;
  token_id: number;
}

/** Load the GGUF file at `path` (as `dtype`; left out: the backend's default) for the chat's next turns. */
export interface LoadModelRequest {
  type: "load_model";
  path: string;
  dtype?: string | null;
}

/**
 * A batch of a turn's events (every ~40 ms while it runs, or a `fetch`'s reply), the pieces of the tokens in them, and
 * the turn's account when it is due (at most every 0.2 s while it streams; always at its end and in a reply). A view
 * keeps each event once, by its sequence number.
 */
export interface EventsMessage {
  type: "events";
  turn_id: string;
  events: ChatEvent[];
  pieces: Pieces;
  account: TurnAccount | null;
}

/** A column group of a `segments` map: a segment of the prompt (or "generated"), as token positions. */
export interface AttentionSegment {
  label: string;
  kind: SegmentKind;
  start: number;
  end: number;
}

/** An attention map, its matrix in the message's one binary buffer (row-major float16, little-endian). */
export interface AttentionMessage {
  type: "attention";
  request_id: string;
  turn_id: string;
  layer: number;
  head: number;
  mode: AttentionMode;
  shape: [number, number];
  dtype: "float16";
  /** The sequence's length: the final prompt's tokens, then the generated ones. */
  tokens: number;
  prompt_tokens: number;
  /** Each cell averages `pool` × `pool` positions (1: one position a side). */
  pool: number;
  rows_range: [number, number];
  cols_range: [number, number];
  segments: AttentionSegment[];
  /** The layer's sliding window: a query at p sees keys p - window + 1 … p (0: a global layer). */
  window: number;
}

/** Why an attention request could not be answered. */
export interface AttentionErrorMessage {
  type: "attention_error";
  request_id: string;
  message: string;
}

/** A draft's prefix went into the prompt cache. */
export interface PrewarmedMessage {
  type: "prewarmed";
  prewarm: Prewarm;
}

/**
 * A view's message the kernel could not take: an unknown type, a field missing or of the wrong type, or a request for
 * what is not there. The view shows `message`.
 */
export interface RequestErrorMessage {
  type: "request_error";
  /** The message's `type` ("" when it had none). */
  request: string;
  message: string;
}

/** What a view sends the kernel (`model.send(msg)`). */
export type ViewMessage =
  | SendRequest
  | StopRequest
  | NewSessionRequest
  | DraftRequest
  | FetchRequest
  | AttentionRequest
  | ForkRequest
  | LoadModelRequest;

/** What the kernel sends a view (`model.on("msg:custom", …)`); every view of the widget receives each. */
export type KernelMessage =
  | EventsMessage
  | AttentionMessage
  | AttentionErrorMessage
  | PrewarmedMessage
  | RequestErrorMessage;
