// Starts one Azurite service with its extent garbage collection spaced out:
//
//   node azurite-gc.js azurite-blob|azurite-queue [azurite flags...]
//
// Azurite's blob service sweeps its extents 10 minutes after it starts
// and every 10 minutes after; with the blobs of a test run in memory, a
// sweep held its one thread for minutes, and every request of the tests
// then running timed out. The interval (milliseconds) is
// AZURITE_GC_INTERVAL_MS, one day by default: longer than any test run.
"use strict";

const service = (process.argv[2] || "").replace(/^azurite-/, "");
if (service !== "blob" && service !== "queue") {
  console.error("usage: node azurite-gc.js azurite-blob|azurite-queue [azurite flags...]");
  process.exit(2);
}
const interval = Number(process.env.AZURITE_GC_INTERVAL_MS || 24 * 60 * 60 * 1000);
// setTimeout fires at once for anything else, and the sweep would loop.
if (!Number.isInteger(interval) || interval < 1 || interval > 2 ** 31 - 1) {
  console.error(`AZURITE_GC_INTERVAL_MS=${process.env.AZURITE_GC_INTERVAL_MS}: want whole milliseconds from 1 to ${2 ** 31 - 1}`);
  process.exit(2);
}
require(`azurite/dist/src/${service}/utils/constants`).DEFAULT_GC_INTERVAL_MS = interval;
process.argv.splice(2, 1);
require(`azurite/dist/src/${service}/main`);
