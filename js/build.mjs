// Bundles the panel into ../jupyter_chatflow/static/ (widget.js: the anywidget _esm, widget.css: its _css).
// `node build.mjs --harness` also bundles the test pages: test/harness.ts (the screenshot page) and test/turns.ts
// (recorded turns, for tests/integration/test_consistency_browser.py) into test/*.js.
import * as esbuild from "esbuild";

const outdir = new URL("../jupyter_chatflow/static/", import.meta.url).pathname;
const common = { bundle: true, minify: true, target: "es2020", logLevel: "info" };

await esbuild.build({ ...common, entryPoints: ["src/index.ts"], format: "esm", outfile: `${outdir}widget.js` });
await esbuild.build({ ...common, entryPoints: ["src/styles.css"], outfile: `${outdir}widget.css` });
if (process.argv.includes("--harness")) {
  for (const page of ["harness", "turns"])
    await esbuild.build({
      ...common,
      minify: false,
      entryPoints: [`test/${page}.ts`],
      format: "esm",
      outfile: `test/${page}.js`,
    });
}
