/** The anywidget model as the panel sees it: typed traits, the custom messages, and the controls' view of it. */
import type { MessageHandler, PanelTraits, Settings, ViewMessage } from "../types";
import type { ControlsHost } from "../views/controls";

/** The part of the anywidget model the panel uses (a fake in tests implements just this). */
export interface PanelModel {
  get<K extends keyof PanelTraits>(name: K): PanelTraits[K] | undefined;
  set<K extends keyof PanelTraits>(name: K, value: PanelTraits[K]): void;
  save_changes(): void;
  on(name: "msg:custom", callback: MessageHandler): void;
  on(name: `change:${keyof PanelTraits}`, callback: () => void): void;
  off(name: "msg:custom", callback: MessageHandler): void;
  off(name: `change:${keyof PanelTraits}`, callback: () => void): void;
  send(content: ViewMessage, callbacks?: unknown, buffers?: ArrayBuffer[] | ArrayBufferView[]): void;
}

/** What the panel does when the model changes or the kernel sends a message. */
export interface ModelHandlers {
  /** The `turns` or `live` trait changed. */
  turns(): void;
  /** Any other trait changed (title, session, status, model info, prewarm, error, settings, compiling, loading). */
  meta(): void;
  message: MessageHandler;
}

const META_TRAITS = [
  "title",
  "session",
  "status",
  "model_info",
  "prewarm",
  "error",
  "settings",
  "compiling",
  "loading",
] as const;

/** Subscribes the handlers to the model; returns the function that unsubscribes them. */
export function subscribe(model: PanelModel, handlers: ModelHandlers): () => void {
  const { turns, meta, message } = handlers;
  model.on("change:turns", turns);
  model.on("change:live", turns);
  for (const name of META_TRAITS) model.on(`change:${name}`, meta);
  model.on("msg:custom", message);
  return () => {
    model.off("change:turns", turns);
    model.off("change:live", turns);
    for (const name of META_TRAITS) model.off(`change:${name}`, meta);
    model.off("msg:custom", message);
  };
}

/** The header's, settings form's and chat box's access to the model: send, read the status, edit the settings. */
export function controlsHost(model: PanelModel): ControlsHost {
  return {
    send: (msg: ViewMessage) => model.send(msg),
    status: () => String(model.get("status") ?? "idle"),
    settings: () => (model.get("settings") ?? {}) as Settings,
    setSettings: (settings: Settings) => {
      model.set("settings", settings);
      model.save_changes();
    },
  };
}
