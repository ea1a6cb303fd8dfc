// duckdb_pii.mjs reads every Parquet file given, and every Delta log file,
// with DuckDB (an independent reader), and prints as JSON: the rows read,
// and every place a secret string appears in clear (a cell of any column,
// or a Parquet footer statistic, or the log's JSON, add.stats included).
//
//   node duckdb_pii.mjs <dir holding node_modules/@duckdb/node-api> <files.txt> <secrets.txt> <log glob>
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [pkgDir, filesList, secretsList, logGlob] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(pkgDir), 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');
const instance = await DuckDBInstance.create(':memory:', {
  autoinstall_known_extensions: 'false', autoload_known_extensions: 'false', threads: '1',
});
const con = await instance.connect();
const lit = (s) => "'" + String(s).replaceAll("'", "''") + "'";
const all = async (sql) => (await con.runAndReadAll(sql)).getRowObjectsJson();

const files = fs.readFileSync(filesList, 'utf8').split('\n').filter(Boolean);
const secrets = fs.readFileSync(secretsList, 'utf8').split('\n').filter(Boolean);
const found = [];
let rows = 0;
const check = (where, text) => {
  for (const s of secrets) if (text.includes(s)) found.push({ where, secret: s });
};
for (const f of files) {
  const data = await all(`SELECT * FROM read_parquet(${lit(f)})`);
  rows += data.length;
  for (const r of data) check(`${f} row`, JSON.stringify(r));
  const meta = await all(`SELECT path_in_schema, stats_min, stats_max, stats_min_value, stats_max_value FROM parquet_metadata(${lit(f)})`);
  check(`${f} footer statistics`, JSON.stringify(meta));
}
const log = await all(`SELECT json::VARCHAR AS j FROM read_json_objects(${lit(logGlob)}, format = 'newline_delimited')`);
for (const r of log) check('delta log', r.j);
console.log(JSON.stringify({ files: files.length, rows, logActions: log.length, found }));
