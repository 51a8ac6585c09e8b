/**
 * The panel's types. The kernel's events (`ChatEvent` and the types it carries) are generated from
 * jupyter_chatflow/events.py into events.generated.ts; the protocol between kernel and view (the messages both ways,
 * the synced traits, the settings, the model info, the turn rows) from jupyter_chatflow/frontends/panel/protocol.py
 * into protocol.generated.ts. Both are re-exported here beside the one type of the view's own.
 */
import type { KernelMessage } from "./protocol.generated";

export type * from "./events.generated";
export type * from "./protocol.generated";

/** How the view receives a kernel → view custom message and its binary buffers. */
export type MessageHandler = (msg: KernelMessage, buffers?: (DataView | ArrayBuffer)[]) => void;
