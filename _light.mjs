// Feasibility: how soon could a worker without Panel answer a control? (bare Pyodide + numpy + the lab wheel)
import fs from "node:fs";
import { loadPyodide } from "pyodide";
const t = [performance.now()];
const mark = (what) => { const now = performance.now(); console.log(what.padEnd(42), (now - t[t.length - 1]).toFixed(0).padStart(6), "ms", (now - t[0]).toFixed(0).padStart(6), "ms total"); t.push(now); };
const py = await loadPyodide({ packages: [] });
mark("Pyodide runtime");
await py.loadPackage(process.cwd() + "/.cache/pyodide-0.29.3/" + fs.readdirSync(".cache/pyodide-0.29.3").find((f) => f.startsWith("numpy")), { messageCallback: () => {} });
mark("numpy loaded");
const site = process.argv[2];
const wheel = fs.readdirSync(site + "/wheels").find((f) => f.startsWith("split_the_fleet") || f.startsWith("lab"));
const sp = py.runPython("import site; site.getsitepackages()[0]");
py.unpackArchive(new Uint8Array(fs.readFileSync(site + "/wheels/" + wheel)), "wheel", { extractDir: sp });
mark("lab wheel unpacked (" + wheel.slice(0, 20) + ")");
py.runPython("import numpy");
mark("import numpy");
py.runPython("import lab.core as core; from lab.core.missions import list_missions");
mark("import lab.core");
py.runPython("m = {x.id: x for x in list_missions()}['mixing-hurts']");
mark("missions listed");
py.runPython("s = m.apply({**m.settings(m.scenario), 'gpus': 5}); r = core.simulate(s); rows = core.request_metrics(r); met = core.summarize(r, rows)");
mark("a changed setting simulated + measured");
py.runPython("s = m.apply({**m.settings(m.scenario), 'gpus': 6}); r = core.simulate(s); rows = core.request_metrics(r); met = core.summarize(r, rows)");
mark("another (warm)");
try { py.runPython("from lab.ui.data.canvas_data import run_layers; run_layers(r)"); mark("canvas data (lab.ui.data.canvas_data)"); } catch (e) { console.log("canvas data:", String(e).split("\n").slice(-2).join(" ")); }
