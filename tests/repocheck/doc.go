// Package repocheck checks the repository itself rather than the code: a
// clone stays small (no tracked file over MaxFileSize outside a testdata/
// folder, where fixtures from other writers live). It has only tests; CI
// runs them with every other package.
package repocheck

// MaxFileSize is the largest file the repository may track outside a
// testdata/ folder: a built binary or a data dump committed by mistake
// is far larger, and every clone would download it forever.
const MaxFileSize = 1 << 20
