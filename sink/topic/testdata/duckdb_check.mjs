// duckdb_check.mjs reads Delta topic tables with DuckDB, an independent
// reader, and prints what it sees as JSON on stdout; the Go test
// (duckdb_test.go) decides whether that is right.
//
//   node duckdb_check.mjs <dir holding node_modules/@duckdb/node-api> <table dir>...
//   node duckdb_check.mjs --summary <dir> <table dir>...   (the snapshot only, rows counted, not printed:
//                                                          for large tables, e.g. after a soak run)
//
// The Delta log is read with read_json_objects and the data files with
// read_parquet: the delta extension cannot be downloaded here, and
// autoloading is off so a missing extension fails fast instead of hanging.
// "snapshot" replays the log as a Delta reader does (the newest checkpoint,
// read with read_parquet, then the JSON commits after it, removes undoing
// adds) and reads the rows of the active files: what a reader of a
// compacted, cleaned-up and vacuumed table gets.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const summary = process.argv[2] === '--summary';
const [pkgDir, ...tables] = process.argv.slice(summary ? 3 : 2);
if (!pkgDir || tables.length === 0) {
  console.error('usage: duckdb_check.mjs <duckdb cache dir> <table dir>...');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(pkgDir), 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');

const instance = await DuckDBInstance.create(':memory:', {
  autoinstall_known_extensions: 'false',
  autoload_known_extensions: 'false',
  threads: '1',
});
const con = await instance.connect();

const lit = (s) => "'" + String(s).replaceAll("'", "''") + "'";
const all = async (sql) => (await con.runAndReadAll(sql)).getRowObjectsJson();

await con.run(`SET TimeZone = 'UTC'`).catch(() => {}); // needs ICU; epoch_us below does not

async function checkTable(dir) {
  const log = lit(path.join(dir, '_delta_log', '*.json'));
  await con.run(`CREATE OR REPLACE TEMP TABLE log AS
    SELECT regexp_extract(filename, '(\\d{20})\\.json$', 1)::BIGINT AS version, json
    FROM read_json_objects(${log}, format = 'newline_delimited', filename = true)`);

  const actions = await all(`SELECT version, json_keys(json)[1] AS action FROM log ORDER BY version, action`);
  const protocol = await all(`SELECT * FROM (
      SELECT unnest(json_transform(json->'$.protocol',
        '{"minReaderVersion":"INTEGER","minWriterVersion":"INTEGER","writerFeatures":["VARCHAR"],"readerFeatures":["VARCHAR"]}'), recursive := false)
      FROM log WHERE json_exists(json, '$.protocol'))`);
  await con.run(`CREATE OR REPLACE TEMP TABLE md AS SELECT json->'$.metaData' AS md FROM log WHERE json_exists(json, '$.metaData')`);
  const configuration = await all(`SELECT k AS key,
      json_type(md, '$.configuration."' || k || '"') AS type,
      json_extract_string(md, '$.configuration."' || k || '"') AS value
    FROM (SELECT md, unnest(json_keys(md->'configuration')) AS k FROM md) ORDER BY k`);
  const metadata = await all(`SELECT md->>'id' AS id, md->>'name' AS name,
      md->>'$.format.provider' AS provider, json_type(md, '$.partitionColumns') AS partitionColumnsType,
      json_array_length(md->'partitionColumns') AS partitionColumns FROM md`);
  const schema = await all(`SELECT f->>'name' AS name, f->>'type' AS type, (f->'nullable')::BOOLEAN AS nullable
    FROM (SELECT unnest(json_extract((md->>'schemaString')::JSON, '$.fields[*]')) AS f FROM md)`);
  const txns = await all(`SELECT version, json->>'$.txn.appId' AS appId, (json->'$.txn.version')::BIGINT::VARCHAR AS txnVersion
    FROM log WHERE json_exists(json, '$.txn') ORDER BY version`);
  const adds = await all(`SELECT version, a->>'path' AS path, (a->'size')::BIGINT::VARCHAR AS size,
      json_type(a, '$.partitionValues') AS partitionValuesType, json_type(a, '$.stats') AS statsType,
      json_valid(a->>'stats') AS statsValid, (a->'dataChange')::BOOLEAN AS dataChange,
      ((a->>'stats')::JSON->'numRecords')::BIGINT::VARCHAR AS numRecords,
      ((a->>'stats')::JSON->'$.minValues.commit_lsn')::BIGINT::VARCHAR AS minLSN,
      ((a->>'stats')::JSON->'$.maxValues.commit_lsn')::BIGINT::VARCHAR AS maxLSN,
      epoch_us(((a->>'stats')::JSON->>'$.minValues.occurred_at')::TIMESTAMPTZ)::VARCHAR AS minOccurredAt,
      epoch_us(((a->>'stats')::JSON->>'$.maxValues.occurred_at')::TIMESTAMPTZ)::VARCHAR AS maxOccurredAt,
      ((a->>'stats')::JSON->'$.nullCount.headers')::BIGINT::VARCHAR AS nullHeaders
    FROM (SELECT version, json->'$.add' AS a FROM log WHERE json_exists(json, '$.add'))
    ORDER BY version, path`);

  const files = [];
  const rows = [];
  for (const add of adds) {
    const f = lit(path.join(dir, decodeURIComponent(add.path)));
    const [agg] = await all(`SELECT count(*)::VARCHAR AS rows,
        min(commit_lsn)::VARCHAR AS minLSN, max(commit_lsn)::VARCHAR AS maxLSN,
        epoch_us(min(occurred_at))::VARCHAR AS minOccurredAt, epoch_us(max(occurred_at))::VARCHAR AS maxOccurredAt,
        count(*) FILTER (WHERE headers IS NULL)::VARCHAR AS nullHeaders
      FROM read_parquet(${f})`);
    const columns = await all(`SELECT column_name AS name, column_type AS type FROM (DESCRIBE SELECT * FROM read_parquet(${f}))`);
    const parquetSchema = await all(`SELECT name, type, repetition_type AS repetition, logical_type AS logical
      FROM parquet_schema(${f}) WHERE name <> 'schema'`);
    const codecs = await all(`SELECT DISTINCT compression FROM parquet_metadata(${f})`);
    files.push({ path: add.path, ...agg, columns, parquetSchema, codecs: codecs.map((c) => c.compression) });
    for (const r of await all(`SELECT * REPLACE (
          epoch_us(occurred_at)::VARCHAR AS occurred_at, epoch_us(commit_time)::VARCHAR AS commit_time,
          commit_lsn::VARCHAR AS commit_lsn, xid::VARCHAR AS xid)
        FROM read_parquet(${f}, file_row_number = true) ORDER BY file_row_number`)) {
      delete r.file_row_number;
      rows.push(r);
    }
  }
  const snapshot = await snapshotOf(dir);
  return { actions, protocol, configuration, metadata, schema, txns, adds, files, rows, snapshot };
}

async function snapshotOf(dir, summary = false) {
  const logDir = path.join(dir, '_delta_log');
  const names = fs.readdirSync(logDir);
  let cp = -1;
  for (const n of names) {
    const m = /^(\d{20})\.checkpoint\.parquet$/.exec(n);
    if (m) cp = Math.max(cp, Number(m[1]));
  }
  const commits = names.map((n) => /^(\d{20})\.json$/.exec(n)).filter(Boolean).map((m) => Number(m[1]))
    .filter((v) => v > cp).sort((a, b) => a - b);
  const active = new Map();
  const txns = {};
  let protocol = null, schemaString = null, configuration = null, tombstones = 0;
  if (cp >= 0) {
    const f = lit(path.join(logDir, String(cp).padStart(20, '0') + '.checkpoint.parquet'));
    for (const a of await all(`SELECT add.path AS path, add.size::VARCHAR AS size, add.dataChange AS dataChange, add.stats AS stats
        FROM read_parquet(${f}) WHERE add.path IS NOT NULL`)) active.set(a.path, a);
    for (const t of await all(`SELECT txn.appId AS appId, txn.version::VARCHAR AS version FROM read_parquet(${f}) WHERE txn.appId IS NOT NULL`)) {
      txns[t.appId] = t.version;
    }
    [{ tombstones }] = await all(`SELECT count(*)::INTEGER AS tombstones FROM read_parquet(${f}) WHERE remove.path IS NOT NULL`);
    const [p] = await all(`SELECT protocol.minReaderVersion AS minReaderVersion, protocol.minWriterVersion AS minWriterVersion,
        protocol.writerFeatures AS writerFeatures FROM read_parquet(${f}) WHERE protocol.minReaderVersion IS NOT NULL`);
    protocol = p;
    const [m] = await all(`SELECT metaData.schemaString AS schemaString, map_keys(metaData.configuration) AS k,
        map_values(metaData.configuration) AS v FROM read_parquet(${f}) WHERE metaData.id IS NOT NULL`);
    schemaString = m.schemaString;
    configuration = Object.fromEntries(m.k.map((k, i) => [k, m.v[i]]));
  }
  for (const [i, v] of commits.entries()) {
    if (v !== cp + 1 + i) throw new Error(`${dir}: commit ${cp + 1 + i} is missing`);
    const f = lit(path.join(logDir, String(v).padStart(20, '0') + '.json'));
    for (const { json } of await all(`SELECT json FROM read_json_objects(${f}, format = 'newline_delimited')`)) {
      const a = JSON.parse(json);
      if (a.remove) { active.delete(a.remove.path); tombstones++; }
      if (a.add) active.set(a.add.path, { path: a.add.path, size: String(a.add.size), dataChange: a.add.dataChange, stats: a.add.stats });
      if (a.txn) txns[a.txn.appId] = String(a.txn.version);
      if (a.protocol) protocol = a.protocol;
      if (a.metaData) { schemaString = a.metaData.schemaString; configuration = a.metaData.configuration; }
    }
  }
  const files = [...active.values()];
  let rows = [], ordered = true;
  if (summary && files.length > 0) {
    const list = '[' + files.map((a) => lit(path.join(dir, decodeURIComponent(a.path)))).join(',') + ']';
    const [c] = await all(`SELECT count(*)::BIGINT AS n, count(DISTINCT event_id)::BIGINT AS ids
        FROM read_parquet(${list}, union_by_name = true)`);
    const [o] = await all(`SELECT count(*)::INTEGER AS bad FROM (
        SELECT (commit_lsn, seq) < lag((commit_lsn, seq)) OVER (PARTITION BY filename ORDER BY file_row_number) AS back
        FROM read_parquet(${list}, filename = true, file_row_number = true, union_by_name = true)) WHERE back`);
    return { checkpointVersion: cp, commits: commits.length, files: files.length, rows: Number(c.n), ids: Number(c.ids), ordered: o.bad === 0, txns };
  }
  if (files.length > 0) {
    const list = '[' + files.map((a) => lit(path.join(dir, decodeURIComponent(a.path)))).join(',') + ']';
    rows = await all(`SELECT * REPLACE (
          epoch_us(occurred_at)::VARCHAR AS occurred_at, epoch_us(commit_time)::VARCHAR AS commit_time,
          commit_lsn::VARCHAR AS commit_lsn, xid::VARCHAR AS xid), commit_lsn AS _lsn
        FROM read_parquet(${list}, filename = true, file_row_number = true, union_by_name = true)
        ORDER BY _lsn, seq`);
    const [o] = await all(`SELECT count(*)::INTEGER AS bad FROM (
        SELECT (commit_lsn, seq) < lag((commit_lsn, seq)) OVER (PARTITION BY filename ORDER BY file_row_number) AS back
        FROM read_parquet(${list}, filename = true, file_row_number = true, union_by_name = true)) WHERE back`);
    ordered = o.bad === 0;
    for (const r of rows) { delete r.filename; delete r.file_row_number; delete r._lsn; }
  }
  return { checkpointVersion: cp, commits, files, tombstones, txns, protocol, schemaString, configuration, rows, ordered };
}

const out = {};
for (const t of tables) out[t] = summary ? await snapshotOf(t, true) : await checkTable(t);
process.stdout.write(JSON.stringify(out));
