/** The panel mounted for a test: a fresh host element per test, a fake model, the panel's cleanup after the test. */
import { afterEach, beforeEach, vi } from "vitest";
import widget from "../src/index";
import { baseTraits, FakeModel } from "./fake_model";

export interface PanelPage {
  /** The element the panel is drawn into (a new one per test). */
  readonly host: HTMLElement;
  /** Draws the panel on a fake model with these traits (the others as `baseTraits` has them). */
  mount(traits: Record<string, unknown>): FakeModel;
  /** Draws the panel on this model. */
  render(model: FakeModel): FakeModel;
  /** Runs the panel's cleanup now, as anywidget does when the view goes away. */
  unmount(): void;
  /** The element with this `data-testid`. */
  q<T extends HTMLElement = HTMLElement>(testId: string): T;
}

/** Registers the setup and teardown of every test in the file; call it once, at the file's top level. */
export function usePanelPage(): PanelPage {
  let host = document.createElement("div");
  let cleanup: (() => void) | null = null;
  beforeEach(() => {
    host = document.createElement("div");
    document.body.appendChild(host);
    vi.spyOn(console, "error").mockImplementation(() => {}); // jsdom: canvas getContext is not implemented
  });
  afterEach(() => {
    page.unmount();
    host.remove();
    vi.useRealTimers();
    vi.restoreAllMocks();
  });
  const page: PanelPage = {
    get host() {
      return host;
    },
    render(model) {
      cleanup = widget.render({ model, el: host });
      return model;
    },
    mount: (traits) => page.render(new FakeModel(baseTraits(traits))),
    unmount() {
      cleanup?.();
      cleanup = null;
    },
    q: <T extends HTMLElement>(testId: string) => host.querySelector(`[data-testid="${testId}"]`) as T,
  };
  return page;
}
