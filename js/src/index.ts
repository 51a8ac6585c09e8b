/**
 * The anywidget entry point: draws the panel (src/panel/panel.ts) into the widget's element; anywidget calls the
 * returned function when the view goes away.
 *
 *   export default { render({ model, el }) { …; return cleanup } }
 */

import type { PanelModel } from "./panel/model";
import { Panel } from "./panel/panel";

export type { PanelModel } from "./panel/model";

function render({ model, el }: { model: PanelModel; el: HTMLElement }): () => void {
  const panel = new Panel(model, el);
  return () => panel.dispose();
}

export default { render };
