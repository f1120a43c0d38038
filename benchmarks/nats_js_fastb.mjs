// FASTB for nats.js: one fast-ingest batch of N messages with @nats-io/jetstream's
// startFastIngest (3.4.0: exported from "@nats-io/jetstream/internal", the entry point
// its companion packages wrap), the same shape as driver_ours.fast_batch: a warm-up
// batch, then the timed batch (start with the first message, add the rest, end).
//
// Run by benchmarks/driver_natsjs.py, which finds node and the modules:
//   node nats_js_fastb.mjs --modules DIR --port P --n N --size B --storage file|memory
// DIR holds node_modules/@nats-io/{transport-node,jetstream}. One JSON line per result,
// in the rows' format of benchmarks/__init__.py (result()).
import { createRequire } from "node:module";
import { join } from "node:path";

const args = Object.fromEntries(
  process.argv.slice(2).flatMap((v, i, all) => (v.startsWith("--") ? [[v.slice(2), all[i + 1]]] : [])),
);
const require = createRequire(join(args.modules, "package.json"));
const { connect } = require("@nats-io/transport-node");
const { jetstreamManager, StorageType } = require("@nats-io/jetstream");
const { startFastIngest } = require("@nats-io/jetstream/internal");

const CLIENT = "nats.js";
const n = Number(args.n);
const size = Number(args.size);
const label = args.label ?? "FASTB";
const SUBJECT = "bench.s";
const OPTIONS = { allowGaps: false, ackInterval: 500, maxOutstandingAcks: 2 }; // as ours

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const now = () => Number(process.hrtime.bigint()) / 1e9;

const nc = await connect({ servers: `127.0.0.1:${args.port}` });
try {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: "S",
    subjects: ["bench.>"],
    storage: args.storage === "memory" ? StorageType.Memory : StorageType.File,
    allow_batched: true,
  });
  const payload = new Uint8Array(size).fill(120);
  const warm = await startFastIngest(nc, SUBJECT, payload, OPTIONS);
  await warm.end();

  const c0 = cpuNow();
  const t0 = now();
  const batch = await startFastIngest(nc, SUBJECT, payload, OPTIONS);
  for (let i = 1; i < n; i++) await batch.add(SUBJECT, payload);
  const ack = await batch.end();
  const secs = now() - t0;
  const cpu = cpuNow() - c0;
  console.log(JSON.stringify({
    client: CLIENT, scenario: label, n, size,
    secs: +secs.toFixed(4), msgs_per_s: +(n / secs).toFixed(1),
    mb_per_s: +((n * size) / secs / 1e6).toFixed(3),
    cpu_s: +cpu.toFixed(4), cpu_us_per_msg: +((cpu / n) * 1e6).toFixed(3),
    client_cpu_pct: +((100 * cpu) / secs).toFixed(1),
    errors: n - (ack.count ?? 0),
  }));
} finally {
  await nc.close();
}
