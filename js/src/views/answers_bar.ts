/** The bar above the conversation: answers as rendered Markdown ("text") or as token chips ("tokens"). */
import { el } from "../dom";
import type { AnswerView } from "./stream";

const TITLES: Record<AnswerView, string> = {
  text: "Answers as rendered Markdown",
  tokens: "Answers as tokens: hover or click one for what the sampler saw, fork from it",
};

/** The bar, "text" pressed; a click on a view presses it and calls `onChange`. */
export function answersBar(onChange: (view: AnswerView) => void): HTMLElement {
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
  buttons.forEach((button, i) => {
    button.addEventListener("click", () => {
      for (const other of buttons) other.setAttribute("aria-pressed", String(other === button));
      onChange(views[i]);
    });
  });
  return el(
    "div",
    { class: "cf-convo-bar" },
    el("span", { class: "cf-muted", text: "answers as" }),
    el("span", { class: "cf-seg", role: "group" }, ...buttons),
  );
}
