// duckdb_scan.mjs scans parquet files with DuckDB, reading every column of
// every row, and prints {"rows": N, "ms": T, "cpuMs": C} with T the query's
// wall time (the reference for the consumer backlog benchmark) and C the
// CPU time the process spent in it (all DuckDB threads).
//
//   node duckdb_scan.mjs <dir holding node_modules/@duckdb/node-api> <file list (one path per line)>
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const [pkgDir, listFile] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(pkgDir), 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');
const instance = await DuckDBInstance.create(':memory:', {
  autoinstall_known_extensions: 'false',
  autoload_known_extensions: 'false',
});
const con = await instance.connect();
const files = readFileSync(listFile, 'utf8').split('\n').filter(Boolean);
const list = '[' + files.map((f) => "'" + f.replaceAll("'", "''") + "'").join(',') + ']';
const sql = `SELECT count(*)::BIGINT AS n,
  sum(length(event_id) + length(topic) + length(key) + length(type) + length(payload) + coalesce(length(headers), 0))::BIGINT AS bytes,
  sum(schema_version + seq)::BIGINT AS ints, sum(commit_lsn + xid)::BIGINT AS longs,
  max(epoch_us(occurred_at))::BIGINT AS occ, max(epoch_us(commit_time))::BIGINT AS ct
  FROM read_parquet(${list})`;
const c0 = process.cpuUsage();
const t0 = performance.now();
const rows = (await con.runAndReadAll(sql)).getRowObjectsJson();
const ms = performance.now() - t0;
const cpu = process.cpuUsage(c0);
console.log(JSON.stringify({ rows: Number(rows[0].n), ms, cpuMs: (cpu.user + cpu.system) / 1000 }));
