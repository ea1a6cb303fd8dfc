package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupportedProtocol is wrapped by every protocol-gate refusal.
var ErrUnsupportedProtocol = errors.New("delta: unsupported table protocol")

// Highest protocol versions this package implements.
const (
	MaxReaderVersion = 3
	MaxWriterVersion = 7
)

// Reader features this package can read correctly (they need nothing from a
// reader that ignores deletion vectors, column mapping and v2 checkpoints).
var supportedReaderFeatures = map[string]bool{
	"timestampNtz":        true,
	"vacuumProtocolCheck": true,
	"columnMapping":       true, // only while delta.columnMapping.mode is none
}

// Writer features a blind appender honours (some only while unused; see
// CheckWritable).
var supportedWriterFeatures = map[string]bool{
	"appendOnly":          true, // we only ever add
	"invariants":          true, // only while no column has delta.invariants
	"checkConstraints":    true, // only while no delta.constraints.* is set
	"changeDataFeed":      true, // appends need no cdc files
	"generatedColumns":    true, // only while no generation expression
	"identityColumns":     true, // only while no identity column
	"columnMapping":       true, // only while mode is none
	"timestampNtz":        true,
	"vacuumProtocolCheck": true,
	"domainMetadata":      true, // we write none and checkpoints keep them
	"inCommitTimestamp":   true, // Commit writes ICT when enabled
}

// protocolError is a protocol-gate refusal; detail names the cause.
type protocolError struct{ detail string }

func (e *protocolError) Error() string { return ErrUnsupportedProtocol.Error() + ": " + e.detail }

func (e *protocolError) Unwrap() error { return ErrUnsupportedProtocol }

func refuse(format string, args ...any) error {
	return &protocolError{detail: fmt.Sprintf(format, args...)}
}

// CheckReadable refuses tables this reader would read wrongly.
func CheckReadable(p Protocol, m Metadata) error {
	if p.MinReaderVersion > MaxReaderVersion {
		return refuse("table requires reader version %d; this reader supports up to %d", p.MinReaderVersion, MaxReaderVersion)
	}
	if p.MinReaderVersion < 1 {
		return refuse("invalid minReaderVersion %d", p.MinReaderVersion)
	}
	if p.MinReaderVersion == 3 {
		for _, f := range p.ReaderFeatures {
			if !supportedReaderFeatures[f] {
				return refuse("table requires reader feature %q, which this reader does not implement", f)
			}
		}
	}
	if mode := columnMappingMode(m); mode != "none" {
		return refuse("table uses column mapping mode %q, which this reader does not implement", mode)
	}
	return nil
}

// CheckWritable refuses tables this package cannot append to without
// breaking a rule of their protocol. It implies CheckReadable.
func CheckWritable(p Protocol, m Metadata) error {
	if err := CheckReadable(p, m); err != nil {
		return err
	}
	if p.MinWriterVersion > MaxWriterVersion {
		return refuse("table requires writer version %d; this writer supports up to %d", p.MinWriterVersion, MaxWriterVersion)
	}
	if p.MinWriterVersion < 1 {
		return refuse("invalid minWriterVersion %d", p.MinWriterVersion)
	}
	if p.MinReaderVersion == 3 && p.MinWriterVersion != 7 {
		return refuse("reader version 3 requires writer version 7, table has %d", p.MinWriterVersion)
	}
	features := impliedWriterFeatures(p)
	for _, f := range features {
		if !supportedWriterFeatures[f] {
			return refuse("table requires writer feature %q, which this writer does not implement", f)
		}
	}
	return checkFeaturesUnused(features, m)
}

// impliedWriterFeatures lists the features a writer must honour: the
// explicit list at v7, the cumulative legacy set below.
func impliedWriterFeatures(p Protocol) []string {
	if p.MinWriterVersion == 7 {
		return append(append([]string{}, p.WriterFeatures...), p.ReaderFeatures...)
	}
	legacy := [][]string{
		2: {"appendOnly", "invariants"},
		3: {"checkConstraints"},
		4: {"changeDataFeed", "generatedColumns"},
		5: {"columnMapping"},
		6: {"identityColumns"},
	}
	var out []string
	for v := 2; v <= int(p.MinWriterVersion) && v < len(legacy); v++ {
		out = append(out, legacy[v]...)
	}
	return out
}

// checkFeaturesUnused verifies that the features we honour only by absence
// are indeed not in use.
func checkFeaturesUnused(features []string, m Metadata) error {
	var keys []string
	if len(m.SchemaString) > 0 {
		walkFields(json.RawMessage(m.SchemaString), func(f StructField) {
			for k := range f.Metadata {
				keys = append(keys, k)
			}
		})
	}
	uses := func(prefix string) bool {
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				return true
			}
		}
		return false
	}
	for _, f := range features {
		var used bool
		switch f {
		case "invariants":
			used = uses("delta.invariants")
		case "generatedColumns":
			used = uses("delta.generationExpression")
		case "identityColumns":
			used = uses("delta.identity.")
		case "checkConstraints":
			for k := range m.Configuration {
				used = used || strings.HasPrefix(k, "delta.constraints.")
			}
		}
		if used {
			return refuse("table uses writer feature %q, which this writer does not implement", f)
		}
	}
	if uses("CURRENT_DEFAULT") {
		return refuse("table has column defaults, which this writer does not implement")
	}
	return nil
}

func columnMappingMode(m Metadata) string {
	mode := strings.ToLower(strings.TrimSpace(m.Configuration["delta.columnMapping.mode"]))
	if mode == "" {
		return "none"
	}
	return mode
}

// checkProtocolConfig verifies that a protocol is high enough for the
// properties a new table sets (delta-protocol.md §3).
func checkProtocolConfig(p Protocol, m Metadata) error {
	has := func(f string) bool {
		for _, x := range p.WriterFeatures {
			if x == f {
				return true
			}
		}
		return false
	}
	need := func(key string, legacy int32, feature string) error {
		if m.Configuration[key] != "true" {
			return nil
		}
		if p.MinWriterVersion == 7 && !has(feature) {
			return fmt.Errorf("%s=true needs writer feature %q", key, feature)
		}
		if p.MinWriterVersion < 7 && p.MinWriterVersion < legacy {
			return fmt.Errorf("%s=true needs writer version %d, protocol has %d", key, legacy, p.MinWriterVersion)
		}
		return nil
	}
	if err := need("delta.appendOnly", 2, "appendOnly"); err != nil {
		return err
	}
	if err := need("delta.enableChangeDataFeed", 4, "changeDataFeed"); err != nil {
		return err
	}
	if m.Configuration["delta.enableInCommitTimestamps"] == "true" && !has("inCommitTimestamp") {
		return errors.New("delta.enableInCommitTimestamps=true needs writer feature \"inCommitTimestamp\"")
	}
	return nil
}

// ictEnabled reports whether commits must carry inCommitTimestamp.
func ictEnabled(p Protocol, m Metadata) bool {
	if m.Configuration["delta.enableInCommitTimestamps"] != "true" || p.MinWriterVersion != 7 {
		return false
	}
	for _, f := range p.WriterFeatures {
		if f == "inCommitTimestamp" {
			return true
		}
	}
	return false
}
