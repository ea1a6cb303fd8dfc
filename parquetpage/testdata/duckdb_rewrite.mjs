// duckdb_rewrite.mjs rewrites a parquet file with DuckDB, another writer,
// so the Go test (pages_duckdb_test.go) can check the consumer reads
// DuckDB's pages as it reads arrow-go's.
//
//   node duckdb_rewrite.mjs <dir holding node_modules/@duckdb/node-api> <src> <dst> <COPY options>
import { createRequire } from 'node:module';
import path from 'node:path';

const [pkgDir, src, dst, options] = process.argv.slice(2);
if (!pkgDir || !src || !dst || !options) {
  console.error('usage: duckdb_rewrite.mjs <duckdb cache dir> <src> <dst> <COPY options>');
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
await con.run(`COPY (SELECT * FROM read_parquet(${lit(src)})) TO ${lit(dst)} (${options})`);
