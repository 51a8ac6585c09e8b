/** The header (title · session · model · status, buttons), the settings form (with the model file to load), the chat
 * box and the error notice. */
import { clear, el, fmtMs } from "../dom";
import { SETTING_FIELDS } from "../protocol.generated";
import type { ModelInfo, Prewarm, SettingField, Settings, ViewMessage } from "../types";

export const DRAFT_DELAY_MS = 400;

/** A turn is generating, or a model chosen in the settings is loading: nothing else may start. */
function busy(status: string): boolean {
  return status === "generating" || status === "loading";
}

export interface ControlsHost {
  send(msg: ViewMessage): void;
  status(): string;
  settings(): Settings;
  setSettings(settings: Settings): void;
}

export class Header {
  readonly el: HTMLElement;
  readonly title = el("span", { class: "cf-title", "data-testid": "title" });
  private session = el("span", { class: "cf-meta" });
  private modelName = el("span", { class: "cf-meta" });
  readonly status = el("span", { class: "cf-status", "data-testid": "status" });
  readonly settingsToggle = el("button", {
    class: "cf-btn",
    type: "button",
    "data-testid": "settings-toggle",
    "aria-expanded": "false",
    text: "⚙ Settings",
  });
  readonly newSession = el("button", {
    class: "cf-btn",
    type: "button",
    "data-testid": "new-session",
    text: "New session",
  });

  constructor(host: ControlsHost) {
    this.newSession.addEventListener("click", () => host.send({ type: "new_session" }));
    this.el = el(
      "header",
      { class: "cf-header" },
      el(
        "div",
        { class: "cf-header-main" },
        this.title,
        el("div", { class: "cf-header-meta" }, this.session, this.modelName),
      ),
      // (one group: on a narrow panel it goes under the title whole, rather than one button at a time)
      el("div", { class: "cf-header-actions" }, this.status, this.settingsToggle, this.newSession),
    );
  }

  update(title: string, session: string, model: ModelInfo | null, status: string): void {
    this.title.textContent = title || "Untitled chat";
    this.title.classList.toggle("cf-untitled", !title);
    this.session.textContent = session ? `session ${session}` : "";
    this.modelName.textContent = model?.remote ? `${model.name} · via ${model.remote}` : (model?.name ?? "");
    this.title.title = this.title.textContent; // (the whole of each on hover, where the header cuts them)
    this.modelName.title = model?.summary || this.modelName.textContent;
    this.status.textContent = status;
    this.status.className = `cf-status cf-status-${status}`;
  }
}

export class SettingsForm {
  readonly el = el("form", { class: "cf-settings", hidden: true });
  readonly model: ModelField;
  private grid = el("div", { class: "cf-settings-grid" });
  private drawnKey = "";

  constructor(private host: ControlsHost) {
    this.el.addEventListener("submit", (ev) => ev.preventDefault());
    this.model = new ModelField(host);
    this.el.append(this.model.el, this.grid);
  }

  /** Redraws the turn's settings from the trait unless one of them has focus (so typing isn't interrupted). */
  update(settings: Settings, info: ModelInfo | null): void {
    const tools = info?.tools ?? [];
    const key = JSON.stringify([settings, tools]);
    if (key === this.drawnKey || this.grid.contains(document.activeElement)) return;
    this.drawnKey = key;
    clear(this.grid);
    this.grid.append(...SETTING_FIELDS.map((f) => this.numberField(f, settings[f.key])));
    this.grid.append(...this.safetyAndMemory(settings), ...this.toolFields(settings, tools));
  }

  /** Writes `patch` over the trait's settings as they are now (not as they were drawn). */
  private set(patch: Partial<Settings>): void {
    this.host.setSettings({ ...this.host.settings(), ...patch });
  }

  /** A number input: empty clears an optional field, integer fields round, anything else not a number is ignored. */
  private numberField(f: SettingField, value: number | null): HTMLElement {
    const { key, min, max, step } = f;
    const input = el("input", { class: "cf-input", type: "number", name: key, min, max, step, value: value ?? "" });
    input.addEventListener("change", () => {
      const v = input.value.trim();
      if (f.optional && v === "") this.set({ [key]: null });
      else if (step === 1 && v !== "") this.set({ [key]: Math.round(Number(v)) });
      else if (v !== "" && Number.isFinite(Number(v))) this.set({ [key]: Number(v) });
    });
    return field(f.label, input, f.hint);
  }

  private safetyAndMemory(settings: Settings): HTMLElement[] {
    const safety = select("safety", ["off", "input", "all"], settings.safety, (v) =>
      this.set({ safety: v as Settings["safety"] }),
    );
    const memory = el("input", { type: "checkbox", name: "memory", checked: !!settings.memory });
    memory.addEventListener("change", () => this.set({ memory: memory.checked }));
    return [
      field("safety", safety),
      el("label", { class: "cf-field cf-check" }, memory, el("span", { text: "memory" })),
    ];
  }

  /** A checkbox per tool the model offers (kept in the model's order), and the tool choice. */
  private toolFields(settings: Settings, tools: string[]): HTMLElement[] {
    const row = el("div", { class: "cf-row" });
    for (const name of tools) row.appendChild(this.toolBox(name, tools, !!settings.tools?.includes(name)));
    if (!tools.length) row.appendChild(el("span", { class: "cf-muted", text: "none available" }));
    const label = el("span", { class: "cf-field-label", text: "tools" });
    const choices = ["auto", "none", "required", ...tools];
    const choice = select("tool_choice", choices, settings.tool_choice, (v) => this.set({ tool_choice: v }));
    return [el("div", { class: "cf-field cf-tools-field" }, label, row), field("tool choice", choice)];
  }

  private toolBox(name: string, tools: string[], checked: boolean): HTMLElement {
    const box = el("input", { type: "checkbox", name: `tool-${name}`, checked });
    box.addEventListener("change", () => {
      const now = new Set(this.host.settings().tools ?? []);
      if (box.checked) now.add(name);
      else now.delete(name);
      this.set({ tools: tools.filter((t) => now.has(t)) });
    });
    return el("label", { class: "cf-check" }, box, el("span", { text: name }));
  }
}

const DTYPES: [string, string][] = [
  ["", "default dtype"],
  ["float32", "float32"],
  ["bfloat16", "bfloat16 (half the memory)"],
];

/** The settings' model row: a GGUF file's path, what to dequantize it to, and Load (the kernel loads it for the next
 * turns; a file that is missing, not supported or too large is refused in the error notice, and the model in use
 * stays). Under it, what the model in use is, or what the file being loaded is and how far its load is. */
export class ModelField {
  readonly el: HTMLElement;
  readonly path = el("input", {
    class: "cf-input cf-model-path",
    type: "text",
    name: "model_path",
    "data-testid": "model-path",
    placeholder: "path/to/model.gguf",
    "aria-label": "Model file (GGUF)",
    spellcheck: "false",
    autocomplete: "off",
  });
  readonly dtype = el("select", { class: "cf-select", name: "model_dtype", "data-testid": "model-dtype" });
  readonly load = el("button", { class: "cf-btn", type: "button", "data-testid": "load-model", text: "Load" });
  readonly about = el("div", { class: "cf-muted cf-model-about", "data-testid": "model-about" });
  private shownFile: string | null = null;

  constructor(private host: ControlsHost) {
    for (const [value, text] of DTYPES) this.dtype.appendChild(el("option", { value, text }));
    this.load.addEventListener("click", () => this.submit());
    this.path.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.isComposing) {
        ev.preventDefault();
        this.submit();
      }
    });
    const row = el("div", { class: "cf-model-row" }, this.path, this.dtype, this.load);
    const label = el("span", { class: "cf-field-label", text: "model file (GGUF)" });
    this.el = el("div", { class: "cf-field cf-model-field" }, label, row, this.about);
  }

  private submit(): void {
    const path = this.path.value.trim();
    if (!path || this.load.disabled) return;
    this.host.send(
      this.dtype.value ? { type: "load_model", path, dtype: this.dtype.value } : { type: "load_model", path },
    );
  }

  /** The model in use (its file fills the field when it changes, unless the field has focus), the load under way
   * ("" when none), and the panel's status (no load while a turn generates or another loads). */
  update(info: ModelInfo | null, loading: string, status: string): void {
    const file = info?.file ?? "";
    if (file !== this.shownFile && document.activeElement !== this.path) {
      this.path.value = file;
      this.shownFile = file;
    }
    const remote = !!info?.remote;
    this.path.disabled = this.dtype.disabled = remote;
    this.load.disabled = remote || !!loading || busy(status);
    this.about.textContent = remote
      ? "This panel's turns go to a server: the model is the server's."
      : loading || info?.summary || "";
    this.about.classList.toggle("cf-model-loading", !!loading);
  }
}

/** A labelled form field (its label above the control). */
function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  return el("label", { class: "cf-field", title: hint }, el("span", { class: "cf-field-label", text: label }), control);
}

function select(name: string, options: string[], value: string, onChange: (v: string) => void): HTMLSelectElement {
  const s = el("select", { class: "cf-select", name });
  for (const o of options) s.appendChild(el("option", { value: o, text: o, selected: o === value }));
  s.addEventListener("change", () => onChange(s.value));
  return s;
}

export class ChatBox {
  readonly el: HTMLElement;
  readonly input = el("textarea", {
    class: "cf-textarea",
    "data-testid": "chat-input",
    rows: 2,
    placeholder: "Message the model…  (Enter to send, Shift+Enter for a new line)",
    "aria-label": "Message",
  });
  readonly sendBtn = el("button", {
    class: "cf-btn cf-btn-primary",
    type: "button",
    "data-testid": "send",
    text: "Send",
  });
  readonly stopBtn = el("button", {
    class: "cf-btn cf-btn-stop",
    type: "button",
    "data-testid": "stop",
    text: "■ Stop",
    disabled: true,
  });
  private prewarm = el("div", { class: "cf-prewarm", "data-testid": "prewarm" });
  private timer: ReturnType<typeof setTimeout> | null = null;
  private lastDraft = "";

  constructor(private host: ControlsHost) {
    this.sendBtn.addEventListener("click", () => this.submit());
    this.stopBtn.addEventListener("click", () => host.send({ type: "stop" }));
    this.input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.submit();
      }
    });
    this.input.addEventListener("input", () => this.scheduleDraft());
    this.el = el(
      "div",
      { class: "cf-chatbox" },
      el(
        "div",
        { class: "cf-chatbox-row" },
        this.input,
        el("div", { class: "cf-chatbox-buttons" }, this.sendBtn, this.stopBtn),
      ),
      this.prewarm,
    );
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (!text || busy(this.host.status())) return;
    this.cancelDraft();
    this.host.send({ type: "send", text });
    this.input.value = "";
    this.lastDraft = "";
  }

  private scheduleDraft(): void {
    this.cancelDraft();
    this.timer = setTimeout(() => {
      this.timer = null;
      const text = this.input.value.trim(); // as Send sends it: a prewarm still running when it is sent is joined
      if (this.host.status() === "generating" || !text || text === this.lastDraft) return;
      this.lastDraft = text;
      this.host.send({ type: "draft", text });
    }, DRAFT_DELAY_MS);
  }

  cancelDraft(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  update(status: string, prewarm: Prewarm | null): void {
    this.stopBtn.disabled = status !== "generating";
    this.sendBtn.disabled = busy(status);
    this.prewarm.textContent = prewarm
      ? `prefix prewarmed: ${prewarm.prompt_tokens} tokens (${prewarm.computed_tokens} computed), ${fmtMs(prewarm.latency_ms)}`
      : "";
  }
}

export class Notice {
  readonly el = el("div", { class: "cf-notice", role: "alert", hidden: true });
  private text = el("span", { class: "cf-notice-text" });
  private dismissed = "";

  constructor() {
    const close = el("button", {
      class: "cf-icon-btn",
      type: "button",
      "aria-label": "Dismiss",
      title: "Dismiss",
      text: "×",
    });
    close.addEventListener("click", () => {
      this.dismissed = this.text.textContent ?? "";
      this.el.hidden = true;
    });
    this.el.append(el("span", { class: "cf-notice-icon", "aria-hidden": "true", text: "!" }), this.text, close);
  }

  update(error: string): void {
    if (error !== this.dismissed) this.dismissed = "";
    this.text.textContent = error;
    this.el.hidden = !error || error === this.dismissed;
  }
}
