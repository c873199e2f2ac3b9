// The usearch side of bench/compare/compare_usearch.py: a long-lived node child that holds
// the rows and the queries and times usearch's exactSearch on request.
//
// usage (from compare_usearch.py): node usearch_child.cjs USEARCH_DIR ROWS.f32 QUERIES.f32 DIM
//
// ROWS.f32 / QUERIES.f32: raw little-endian float32, DIM per vector. Requests are JSON lines
// on stdin, one answer line on stdout each:
//   {"op": "info"} -> {"usearch": VERSION, "node": VERSION, "rows": N, "queries": NQ,
//                      "isa": the SIMD targets available to numkong's dispatch}
//   {"op": "i8", "scale": S} -> rows and queries quantized to Int8Array, round(x / S)
//     clamped to [-127, 127] (as lodestar's i8 packing), for later "dtype": "i8" runs
//   {"op": "run", "dtype": "f32"|"i8", "batch": B, "threads": T, "k": K, "single": Q,
//    "keys": bool}
//     batch 1: the first Q queries, one exactSearch call each; batch B > 1: one call with
//     the first B queries. -> {"wall_ms": per query, "cpu_ms": per query (this process's
//     user + system time, all threads), "keys": [[row, ...], ...] when asked}
"use strict";
const fs = require("fs");
const readline = require("readline");
const path = require("path");

const [usearchDir, rowsPath, queriesPath, dimArg] = process.argv.slice(2);
const usearch = require(usearchDir);
const version = JSON.parse(fs.readFileSync(path.join(usearchDir, "package.json"), "utf8")).version;
const dim = Number(dimArg);

// The SIMD targets numkong's dispatch may pick on this CPU, from the addon itself (its
// JavaScript wrapper does not export them); "?" when the loader is not beside usearch.
function isa() {
    try {
        const load = require(path.join(usearchDir, "..", "node-gyp-build"));
        return load(usearchDir).hardwareAccelerationAvailable();
    } catch (e) {
        return "?";
    }
}

function readF32(p) {
    const buf = fs.readFileSync(p);
    const out = new Float32Array(buf.length / 4);
    new Uint8Array(out.buffer).set(buf); // a copy: aligned, its own ArrayBuffer
    return out;
}

const data = { f32: { rows: readF32(rowsPath), queries: readF32(queriesPath) } };
const nrows = data.f32.rows.length / dim;
const nq = data.f32.queries.length / dim;

function quantize(x, scale) {
    const out = new Int8Array(x.length);
    for (let i = 0; i < x.length; i++)
        out[i] = Math.max(-127, Math.min(127, Math.round(x[i] / scale)));
    return out;
}

function run(req) {
    const d = data[req.dtype];
    if (!d)
        throw new Error("dtype " + req.dtype + " not prepared");
    const k = req.k, threads = req.threads;
    const calls = req.batch === 1 ? req.single : 1;
    const per = req.batch === 1 ? 1 : req.batch;
    if (per * calls > nq)
        throw new Error("asked for " + per * calls + " queries, have " + nq);
    // Each call's queries in an ArrayBuffer of their own, made before the clock starts:
    // the addon reads a TypedArray's ArrayBuffer from its start (lib.cpp takes
    // ArrayBuffer().Data(), not the view's byte offset), so a subarray would search the
    // first query every time.
    const qs = [];
    for (let c = 0; c < calls; c++)
        qs.push(d.queries.slice(c * per * dim, (c + 1) * per * dim));
    const keys = [];
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let c = 0; c < calls; c++) {
        const res = usearch.exactSearch(d.rows, qs[c], dim, k, "ip", threads);
        if (req.keys) {
            for (let j = 0; j < per; j++) {
                const row = [];
                for (let i = 0; i < k; i++)
                    row.push(Number(res.keys[j * k + i]));
                keys.push(row);
            }
        }
    }
    const wall = Number(process.hrtime.bigint() - t0) / 1e6;
    const cu = process.cpuUsage(c0);
    const n = calls * per;
    return { wall_ms: wall / n, cpu_ms: (cu.user + cu.system) / 1e3 / n, keys: req.keys ? keys : undefined };
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
    let out;
    try {
        const req = JSON.parse(line);
        if (req.op === "info") {
            out = { usearch: version, node: process.version, rows: nrows, queries: nq, isa: isa() };
        } else if (req.op === "i8") {
            data.i8 = { rows: quantize(data.f32.rows, req.scale), queries: quantize(data.f32.queries, req.scale) };
            out = { ok: true };
        } else if (req.op === "run") {
            out = run(req);
        } else {
            out = { error: "unknown op " + req.op };
        }
    } catch (e) {
        out = { error: String(e && e.message ? e.message : e) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
});
