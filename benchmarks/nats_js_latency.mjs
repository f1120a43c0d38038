// S5 and S5x for nats.js (@nats-io/transport-node and @nats-io/jetstream 3.4), the same
// shapes as benchmarks/driver_ours.py's latency(), serve() and latency_remote():
//   S5:  a responder on this connection (a subscription callback, which nats.js runs on
//        the event loop that read the request), 100 requests to warm up, N timed ones;
//        then N/5 each of stream info (S5info), consumer info (S5cinfo) and creating a
//        durable consumer that exists with the same config (S5ccreate).
//   S5x --serve: only the responder; prints "ready" once the server has its SUB, and
//        answers until its stdin closes.
//   S5x: only the requests, to the responder another process serves.
//
// Run by benchmarks/driver_natsjs.py, which finds node and the modules:
//   node nats_js_latency.mjs --modules DIR --port P --scenario S5|S5x [--serve]
//        --n N --size B --storage file|memory --label L
// One JSON line per result, in the rows' format of benchmarks/__init__.py (result() and
// latency_fields(): p50/p99 by the nearest-rank rule).
import { createRequire } from "node:module";
import { join } from "node:path";

const args = {};
process.argv.slice(2).forEach((word, i, all) => {
  if (word.startsWith("--")) {
    const next = all[i + 1];
    args[word.slice(2)] = next === undefined || next.startsWith("--") ? true : next;
  }
});
const require = createRequire(join(args.modules, "package.json"));
const { connect } = require("@nats-io/transport-node");
const { jetstreamManager, AckPolicy, StorageType } = require("@nats-io/jetstream");

const CLIENT = "nats.js";
const SERVICE = "svc";
const STREAM = "S";
const n = Number(args.n);
const size = Number(args.size);
const payload = new Uint8Array(size).fill(120);

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const clockUs = () => Number(process.hrtime.bigint()) / 1000;

function nearestRank(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

// Call `call` `count` times, one after another; the row `label` with each call's latency.
async function timedCalls(label, count, rowSize, call) {
  const latencies = new Array(count);
  const c0 = cpuNow();
  const t0 = clockUs();
  for (let i = 0; i < count; i++) {
    const start = clockUs();
    await call();
    latencies[i] = clockUs() - start;
  }
  const secs = (clockUs() - t0) / 1e6;
  const cpu = cpuNow() - c0;
  latencies.sort((a, b) => a - b);
  console.log(JSON.stringify({
    client: CLIENT, scenario: label, n: count, size: rowSize,
    secs: +secs.toFixed(4), msgs_per_s: +(count / secs).toFixed(1),
    mb_per_s: +((count * rowSize) / secs / 1e6).toFixed(3),
    cpu_s: +cpu.toFixed(4), cpu_us_per_msg: +((cpu / count) * 1e6).toFixed(3),
    client_cpu_pct: +((100 * cpu) / secs).toFixed(1),
    p50_us: +nearestRank(latencies, 0.5).toFixed(1),
    p99_us: +nearestRank(latencies, 0.99).toFixed(1),
  }));
}

async function requests(nc, label) {
  const request = () => nc.request(SERVICE, payload, { timeout: 2000 });
  for (let i = 0; i < 100; i++) await request();
  await timedCalls(label, n, size, request);
}

async function apiCalls(nc) {
  const jsm = await jetstreamManager(nc);
  const storage = args.storage === "memory" ? StorageType.Memory : StorageType.File;
  await jsm.streams.add({ name: STREAM, subjects: ["bench.>"], storage });
  const durable = (name) => ({ durable_name: name, ack_policy: AckPolicy.Explicit });
  await jsm.consumers.add(STREAM, durable("DINFO"));
  const calls = [
    ["S5info", () => jsm.streams.info(STREAM)],
    ["S5cinfo", () => jsm.consumers.info(STREAM, "DINFO")],
    ["S5ccreate", () => jsm.consumers.add(STREAM, durable("DCREATE"))],
  ];
  const count = Math.max(1, Math.floor(n / 5));
  for (const [label, call] of calls) {
    await call(); // warm-up
    await timedCalls(label, count, 0, call);
  }
}

function answer(nc) {
  nc.subscribe(SERVICE, { callback: (err, m) => { if (!err) m.respond(payload); } });
}

async function serveUntilStdinCloses(nc) {
  answer(nc);
  await nc.flush();
  console.log("ready");
  await new Promise((resolve) => {
    process.stdin.on("end", resolve);
    process.stdin.resume();
  });
}

const nc = await connect({ servers: `127.0.0.1:${args.port}` });
try {
  if (args.scenario === "S5x" && args.serve) {
    await serveUntilStdinCloses(nc);
  } else if (args.scenario === "S5x") {
    await requests(nc, args.label);
  } else {
    answer(nc);
    await nc.flush();
    await requests(nc, args.label);
    await apiCalls(nc);
  }
} finally {
  await nc.close();
}
