/** The bar above the conversation: answers as rendered Markdown ("text") or as token chips ("tokens"), and the
 * lens shading of the chips (issue 36), whose legend (what the shade means, how far the lens is) sits under it. */
import { el } from "../dom";
import { LENS_DEFINITION, NEVER_TEXT } from "./lens";
import type { AnswerView } from "./stream";

const TITLES: Record<AnswerView, string> = {
  text: "Answers as rendered Markdown",
  tokens: "Answers as tokens: hover or click one for what the sampler saw, fork from it",
};

export interface AnswersBar {
  /** The bar. */
  el: HTMLElement;
  /** What the lens shading means and how far the lens is: under the bar, shown while the shading is on. */
  legend: HTMLElement;
  /** Says how far the latest answer's lens is ("" when it is there). */
  setLensStatus(text: string, failed?: boolean): void;
}

/** The bar, "text" pressed; a click on a view presses it and calls `onChange`. With `onLens`, a "lens" toggle
 * shades the chips (it shows them as tokens first) and calls `onLens(on)`. */
export function answersBar(onChange: (view: AnswerView) => void, onLens?: (on: boolean) => void): AnswersBar {
  const views: AnswerView[] = ["text", "tokens"];
  const buttons = views.map((view) =>
    el("button", {
      class: "cf-seg-btn",
      type: "button",
      "data-testid": `view-${view}`,
      "aria-pressed": String(view === "text"),
      text: view,
      title: TITLES[view],
    }),
  );
  const press = (i: number) => {
    for (const other of buttons) other.setAttribute("aria-pressed", String(other === buttons[i]));
    onChange(views[i]);
  };
  buttons.forEach((button, i) => {
    button.addEventListener("click", () => press(i));
  });
  const status = el("span", { class: "cf-muted", "data-testid": "lens-bar-status" });
  const legend = el(
    "div",
    { class: "cf-lens-legend", "data-testid": "lens-legend-bar", hidden: true },
    el("div", { class: "cf-lens-definition", "data-testid": "lens-definition", text: LENS_DEFINITION }),
    el(
      "div",
      { class: "cf-lens-keys" },
      el(
        "span",
        { class: "cf-legend-item" },
        el("span", { class: "cf-muted", text: "embeddings" }),
        el("span", { class: "cf-lens-ramp" }),
        el("span", { class: "cf-muted", text: "last layer" }),
      ),
      el(
        "span",
        { class: "cf-legend-item" },
        el("span", { class: "cf-lens-never-key" }),
        el("span", { text: NEVER_TEXT }),
      ),
    ),
    status,
  );
  const toggle = onLens
    ? el("button", {
        class: "cf-seg-btn cf-lens-toggle",
        type: "button",
        "data-testid": "lens-toggle",
        "aria-pressed": "false",
        text: "lens",
        title: "Shade each answer token by the layer from which it was the model's top choice (computed on demand)",
      })
    : null;
  toggle?.addEventListener("click", () => {
    const on = toggle.getAttribute("aria-pressed") !== "true";
    toggle.setAttribute("aria-pressed", String(on));
    legend.hidden = !on;
    if (on) press(1); // (the shading is on the chips)
    onLens?.(on);
  });
  const bar = el(
    "div",
    { class: "cf-convo-bar" },
    el("span", { class: "cf-muted", text: "answers as" }),
    el("span", { class: "cf-seg", role: "group" }, ...buttons),
    toggle ? el("span", { class: "cf-seg" }, toggle) : null,
  );
  return {
    el: bar,
    legend,
    setLensStatus(text: string, failed = false) {
      status.textContent = text;
      status.className = failed ? "cf-error-text" : "cf-muted";
    },
  };
}
