#!/usr/bin/env node
// Install a wheel into *bare* Pyodide the way the static site's worker does, then run
// a Python program that sees only what the wheel carries (cwd is an empty /tmp/run).
//
// Usage: node tests/pyodide/run_wheel.mjs <wheel.whl> <python-file> [args...]
// Exit codes and output: see bare.mjs.

import fs from "node:fs";
import path from "node:path";
import { bootBarePyodide, die, requireFile, runProgramAndExit } from "./bare.mjs";

const [wheelArg, programArg, ...programArgs] = process.argv.slice(2);
if (!wheelArg || !programArg) die("usage: node tests/pyodide/run_wheel.mjs <wheel.whl> <python-file> [args...]");
const wheelPath = path.resolve(wheelArg);
const programPath = path.resolve(programArg);
requireFile("wheel", wheelPath);
requireFile("Python file", programPath);

const { pyodide, jsVersion } = await bootBarePyodide("the wheel must need only the standard library here");
// Same call as the site's worker (static/site/lab-worker.js).
const sitePackages = pyodide.runPython("import site; site.getsitepackages()[0]");
pyodide.unpackArchive(new Uint8Array(fs.readFileSync(wheelPath)), "wheel", { extractDir: sitePackages });
process.stderr.write(`pyodide-harness: pyodide ${pyodide.version} (npm ${jsVersion}); ${path.basename(wheelPath)} -> ${sitePackages}\n`);
runProgramAndExit(pyodide, programPath, programArgs, { cwd: "/tmp/run" });
