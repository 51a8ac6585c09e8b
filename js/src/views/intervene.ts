/**
 * Under the Attention tab's heatmap: change the model for one turn and answer it again (`intervene` message). A
 * grid of layers × heads to pick heads to knock out ("Answer again without these heads"), and a steering form: a
 * layer, a strength, and a direction from two contrasting texts or (where the model has a safety probe) a probe
 * category. Only the latest turn, once it has ended and while nothing generates, can be answered again.
 */
import { clear, el } from "../dom";
import { summarize, type TurnData } from "../state";
import type { ModelInfo, ProbeSteer, TextSteer, ViewMessage } from "../types";

type Send = (msg: ViewMessage) => void;

/** A head as the grid keys it: "layer.head" (as the Intervened event's words name it). */
const key = (layer: number, head: number) => `${layer}.${head}`;

/** The heads picked, in layer then head order, as the message's [layer, head] pairs. */
export function headPairs(selected: Iterable<string>): [number, number][] {
  const pairs = [...selected].map((k) => k.split(".").map(Number) as [number, number]);
  return pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/** Why the shown turn cannot be answered again now ("" when it can). */
export function interveneBlocker(turn: TurnData | null, latest: boolean, status: string): string {
  if (!turn) return "Send a message first: its answer can then be answered again on a changed model.";
  if (status === "generating") return "A turn is generating: wait for it to end (or press Stop).";
  if (status === "loading") return "A model is loading: wait for it to finish.";
  if (!latest)
    return "Only the latest turn can be answered again: pick “latest” in the turn picker (this one is earlier).";
  if (!summarize(turn.events).terminal) return "The turn has not ended yet: wait for it to end.";
  return "";
}

export class InterveneView {
  readonly el = el("div", { class: "cf-intervene", "data-testid": "intervene" });
  private grid = el("div", {
    class: "cf-head-grid",
    "data-testid": "head-grid",
    role: "group",
    "aria-label": "Heads to knock out",
  });
  private count = el("span", { class: "cf-muted", "data-testid": "heads-count" });
  private clearButton = el("button", { class: "cf-link", type: "button", text: "clear", "data-testid": "heads-clear" });
  private headsButton = el("button", {
    class: "cf-btn cf-btn-primary",
    type: "button",
    "data-testid": "intervene-heads",
    text: "Answer again without these heads",
  });
  private form = el("form", { class: "cf-steer", "data-testid": "steer-form" });
  private layer = el("select", { class: "cf-select", "data-testid": "steer-layer", "aria-label": "Steer after layer" });
  private strength = el("input", {
    class: "cf-input cf-steer-strength",
    type: "number",
    step: "0.1",
    value: "0.3",
    "data-testid": "steer-strength",
    "aria-label": "Strength",
    title:
      "In units of a typical token's residual length at that layer: 0.3 nudges (on the default model, a happy − sad direction after layer 15 turned its morning cheerful), 0.5 already garbles the answer",
  });
  private source = el("select", { class: "cf-select", "data-testid": "steer-source", "aria-label": "Direction" });
  private toward = el("input", {
    class: "cf-input",
    type: "text",
    placeholder: "toward (e.g. love)",
    "data-testid": "steer-toward",
    "aria-label": "Toward",
  });
  private away = el("input", {
    class: "cf-input",
    type: "text",
    placeholder: "away from (e.g. hate)",
    "data-testid": "steer-away",
    "aria-label": "Away from",
  });
  private category = el("select", { class: "cf-select", "data-testid": "steer-category", "aria-label": "Category" });
  private texts = el("span", { class: "cf-steer-texts" }, this.toward, this.away);
  private steerButton = el("button", {
    class: "cf-btn cf-btn-primary",
    type: "button",
    "data-testid": "intervene-steer",
    text: "Answer again, steered",
  });
  private note = el("div", { class: "cf-muted cf-intervene-note", "data-testid": "intervene-note" });
  private selected = new Set<string>();
  private info: ModelInfo | null = null;
  private infoKey = "";
  private turn: TurnData | null = null;
  private latest = false;
  private status = "idle";

  constructor(private send: Send) {
    this.grid.addEventListener("click", (ev) => this.toggle(ev));
    this.clearButton.addEventListener("click", () => {
      this.selected.clear();
      this.drawSelection();
    });
    this.headsButton.addEventListener("click", () => this.sendHeads());
    this.steerButton.addEventListener("click", () => this.sendSteer());
    this.source.addEventListener("change", () => this.drawSource());
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.sendSteer();
    });
    this.form.append(
      field("after layer", this.layer),
      field("strength", this.strength),
      field("direction", this.source),
      this.texts,
      this.category,
      this.steerButton,
    );
    this.el.append(
      el("div", { class: "cf-intervene-title", text: "Answer again on a changed model (for the latest turn only)" }),
      this.note,
      el(
        "div",
        { class: "cf-row cf-intervene-heads" },
        el("span", { class: "cf-muted", text: "Knock out heads: click cells of the grid (layer ↓ · head →)" }),
      ),
      this.grid,
      el("div", { class: "cf-row" }, this.count, this.clearButton, this.headsButton),
      el("div", { class: "cf-muted", text: "Or steer the residual after a layer, along a direction:" }),
      this.form,
    );
    this.drawSelection();
  }

  /** The grid and the steering form's choices for a model: its layers and heads, and its probe's if it has one. */
  setModelInfo(info: ModelInfo): void {
    this.info = info;
    const probeLayers = info.probe_layers ?? [];
    const categories = info.probe_categories ?? [];
    const infoKey = JSON.stringify([info.layers, info.heads, probeLayers, categories]);
    if (infoKey === this.infoKey) return;
    this.infoKey = infoKey;
    this.selected.clear();
    this.drawGrid(info.layers, info.heads);
    clear(this.source);
    this.source.append(el("option", { value: "texts", text: "from one text to another" }));
    if (probeLayers.length && categories.length)
      this.source.append(el("option", { value: "probe", text: "the safety probe's category" }));
    clear(this.category);
    for (const [code, name] of categories) this.category.append(el("option", { value: code, text: `${code} ${name}` }));
    this.drawSource();
    this.drawSelection();
  }

  /** The turn the inspector shows, whether it is the latest, and what the panel is doing. */
  setTurn(turn: TurnData | null, latest: boolean, status: string): void {
    this.turn = turn;
    this.latest = latest;
    this.status = status;
    this.drawSelection();
  }

  private drawGrid(layers: number, heads: number): void {
    clear(this.grid);
    this.grid.style.gridTemplateColumns = `auto repeat(${heads}, 18px)`;
    this.grid.append(el("span", { class: "cf-head-corner" }));
    for (let h = 0; h < heads; h++) this.grid.append(el("span", { class: "cf-head-label", text: h }));
    for (let l = 0; l < layers; l++) {
      this.grid.append(el("span", { class: "cf-head-label cf-head-layer", text: l }));
      for (let h = 0; h < heads; h++)
        this.grid.append(
          el("button", {
            class: "cf-head-cell",
            type: "button",
            "data-testid": "head-cell",
            "data-layer": l,
            "data-head": h,
            "aria-pressed": "false",
            title: `layer ${l}, head ${h}`,
          }),
        );
    }
  }

  private toggle(ev: Event): void {
    const cell = (ev.target as HTMLElement).closest?.(".cf-head-cell") as HTMLElement | null;
    if (!cell) return;
    const k = key(Number(cell.dataset.layer), Number(cell.dataset.head));
    if (this.selected.has(k)) this.selected.delete(k);
    else this.selected.add(k);
    this.drawSelection();
  }

  /** The picked cells marked, their count and names, and the buttons enabled where the turn can be changed. */
  private drawSelection(): void {
    for (const cell of this.grid.querySelectorAll<HTMLElement>(".cf-head-cell")) {
      const on = this.selected.has(key(Number(cell.dataset.layer), Number(cell.dataset.head)));
      cell.setAttribute("aria-pressed", String(on));
      cell.classList.toggle("cf-head-on", on);
    }
    const pairs = headPairs(this.selected);
    const n = pairs.length;
    this.count.textContent = n
      ? `${n} head${n === 1 ? "" : "s"} selected: ${pairs.map(([l, h]) => key(l, h)).join(", ")}`
      : "no heads selected";
    const blocker = this.info && this.info.layers > 0 ? interveneBlocker(this.turn, this.latest, this.status) : "";
    const remote = !this.info || this.info.layers === 0;
    this.note.textContent = remote ? "The model is a server's: it cannot be changed from here." : blocker;
    this.note.hidden = !this.note.textContent;
    const can = !remote && !blocker;
    this.headsButton.disabled = !can || n === 0;
    this.clearButton.hidden = n === 0;
    this.steerButton.disabled = !can;
  }

  /** The layers to steer after: every layer for texts, the probe's for a category. */
  private drawSource(): void {
    const probe = this.source.value === "probe";
    this.texts.hidden = probe;
    this.category.hidden = !probe;
    const layers = this.info?.layers ?? 0;
    const choices = probe ? (this.info?.probe_layers ?? []) : [...Array(layers).keys()];
    const before = this.layer.value;
    clear(this.layer);
    for (const l of choices) this.layer.append(el("option", { value: l, text: l }));
    const keep = choices.map(String).includes(before);
    this.layer.value = keep ? before : String(probe ? (choices[0] ?? 0) : Math.floor(layers / 3));
  }

  private sendHeads(): void {
    if (!this.turn || this.headsButton.disabled) return;
    this.send({ type: "intervene", turn_id: this.turn.turn_id, heads: headPairs(this.selected), steer: null });
  }

  private sendSteer(): void {
    if (!this.turn || this.steerButton.disabled) return;
    const layer = Number(this.layer.value);
    const strength = Number(this.strength.value);
    const steer: TextSteer | ProbeSteer =
      this.source.value === "probe"
        ? { layer, strength, category: this.category.value }
        : { layer, strength, toward: this.toward.value, away: this.away.value };
    this.send({ type: "intervene", turn_id: this.turn.turn_id, heads: [], steer });
  }
}

function field(text: string, control: HTMLElement): HTMLElement {
  return el("label", { class: "cf-field" }, el("span", { class: "cf-field-label", text }), control);
}
