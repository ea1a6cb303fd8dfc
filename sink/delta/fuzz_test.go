package delta

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseCommit: the log-action parser never panics, and whatever it
// accepts replays into a snapshot without panicking.
func FuzzParseCommit(f *testing.F) {
	f.Add([]byte(`{"commitInfo":{"timestamp":1,"operationParameters":{"auto":false}}}` + "\n" +
		`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n" +
		`{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{}","partitionColumns":[],"configuration":{}}}`))
	f.Add([]byte(`{"add":{"path":"a%20b","partitionValues":{"p":null},"size":1,"modificationTime":2,"dataChange":true,"deletionVector":null}}`))
	f.Add([]byte(`{"remove":{"path":"a","dataChange":true}}` + "\n" + `{"txn":{"appId":"a","version":9223372036854775807}}`))
	f.Add([]byte(`{"unknownAction":{"x":1}}` + "\n\n" + `{"cdc":{"path":"c","partitionValues":{},"size":1,"dataChange":false}}`))
	f.Add([]byte(`{"domainMetadata":{"domain":"d","configuration":"{}","removed":false}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		acts, err := ParseCommit(data)
		if err != nil {
			return
		}
		s := newSnapshot()
		s.applyCommit(0, acts, s.CommitTime)
		if _, err := EncodeCommit(acts); err != nil {
			t.Fatalf("re-encode of parsed actions failed: %v", err)
		}
	})
}

// FuzzCheckpoint: the checkpoint reader, the writers' load and the
// readers', never panics on mutated bytes of real checkpoints (delta-spark
// key_value layout and arrow-rs entries).
func FuzzCheckpoint(f *testing.F) {
	dir := os.Getenv("DELTABUS_DELTA_TABLES")
	if dir == "" {
		dir = filepath.Join("testdata", "conformance")
	}
	for _, p := range []string{
		"delta-checkpoint/_delta_log/00000000000000000010.checkpoint.parquet",
		"kernelrs-app-txn-checkpoint/_delta_log/00000000000000000001.checkpoint.parquet",
		"deltars-delta-0.2.0/_delta_log/00000000000000000003.checkpoint.parquet",
	} {
		if data, err := os.ReadFile(filepath.Join(dir, p)); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		_, _ = ParseCheckpoint(context.Background(), data)
		_, _ = parseCheckpoint(context.Background(), data, false) // the reader's load (flat reader)
	})
}

// FuzzFirstCommitInfo: the commitInfo scan of a checkpoint version's
// commit finds what a full parse finds (the first commitInfo) whenever the
// full parse accepts the commit.
func FuzzFirstCommitInfo(f *testing.F) {
	for _, s := range []string{
		`{"commitInfo":{"timestamp":1,"txnId":"t"}}` + "\n" + `{"remove":{"path":"a","dataChange":true}}`,
		`{"remove":{"path":"c000","dataChange":true}}` + "\n" + `{"commitInfo":{"timestamp":2}}`,
		`{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":2,"dataChange":true,"tags":{"commitInfo":"x"}}}` + "\n" + `{"commitInfo":{"timestamp":3}}`,
		`{"COMMITINFO":{"timestamp":4}}`,
		`{"commit\u0049nfo":{"timestamp":5}}`,
		`{"comm` + "\u0130" + `tInfo":{"timestamp":6}}`,
		`{"commitInfo":null}` + "\n" + `{"commitInfo":{"timestamp":7}}`,
		`{"remove":{"path":"a","dataChange":true}}`,
		"\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		acts, err := ParseCommit(data)
		if err != nil {
			return
		}
		var want *CommitInfo
		for i := range acts {
			if acts[i].CommitInfo != nil {
				want = acts[i].CommitInfo
				break
			}
		}
		got, err := firstCommitInfo(data)
		if err != nil {
			t.Fatalf("firstCommitInfo: %v (ParseCommit accepted the commit)", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("firstCommitInfo = %+v, ParseCommit's first commitInfo = %+v", got, want)
		}
	})
}
