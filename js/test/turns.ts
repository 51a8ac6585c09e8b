/**
 * The recorded-turns page: the panel drawn from real turns as a kernel's `turns` trait carries them (records with
 * their accounts, written by tests/integration/record_turns.py), for the consistency suite and its screenshots.
 * `turns.html?data=URL&theme=dark`; the page sets body[data-done] once drawn.
 */
import widget from "../src/index";
import { baseTraits, FakeModel, type TurnRecord } from "./fake_model";

const params = new URLSearchParams(location.search);
if (params.get("theme") === "dark") document.body.classList.add("dark");
const MODEL = {
  name: "SmolLM2 135M Instruct",
  layers: 30,
  heads: 9,
  kv_heads: 3,
  context_length: 8192,
  vocab_size: 49152,
  tools: ["calculator"],
};

/** Draws the recorded turns once they are fetched. */
async function draw(): Promise<void> {
  const response = await fetch(params.get("data") ?? "turns.json");
  const recorded = (await response.json()) as Record<string, TurnRecord>;
  const traits = baseTraits({ turns: Object.values(recorded), title: "Recorded turns", model_info: MODEL });
  widget.render({ model: new FakeModel(traits), el: document.getElementById("app")! });
  document.body.setAttribute("data-kinds", Object.keys(recorded).join(","));
  document.body.setAttribute("data-done", "1");
}

void draw();
